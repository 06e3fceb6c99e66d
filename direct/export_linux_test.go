package direct

// SetResultHook makes q, an io_uring queue, pass every CQE result through f
// before interpreting it; tests inject errors and short counts with it.
func SetResultHook(q Queue, f func(r *Request, done int, res int32) int32) {
	u := q.(*uringQueue)
	u.mu.Lock()
	u.resHook = f
	u.mu.Unlock()
}
