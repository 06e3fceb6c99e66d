package direct

import "errors"

// errNoURing is what newURingQueue returns until the engine exists.
var errNoURing = errors.New("direct: io_uring engine not built")

func newURingQueue(xfer, int) (Queue, error) { return nil, errNoURing }

// URingError reports why EngineAuto would not use io_uring, or nil when it
// would.
func URingError() error { return errNoURing }
