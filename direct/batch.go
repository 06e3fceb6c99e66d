package direct

// A Batcher is a Queue that takes many requests at once, with fewer trips
// into the kernel than a Submit each: the io_uring engine pushes every
// request that fits and submits them all with one io_uring_enter. Call it
// through SubmitBatch, which serves any Queue.
type Batcher interface {
	// SubmitBatch is SubmitBatch(q, rs) for this queue.
	SubmitBatch(rs []Request) (int, error)
}

// SubmitBatch hands rs to q in order, as many Submits would, and returns
// how many it accepted: each of rs[:n] gets exactly one Completion on its
// Done channel, none of rs[n:] does, and err says why rs[n] was refused
// (ErrUnaligned, ErrQueueClosed, a broken ring, a closed file). Like
// Submit it waits (and reaps) while q has Depth requests in flight, so a
// batch longer than Depth goes in as room comes back. On a Queue that is
// no Batcher (the pwrite engine, whose workers call the kernel one
// request at a time anyway) it calls Submit for each request, and a
// batch of one is a Submit on any Queue: it costs an engine less.
//
// A caller with many requests at once (ReadBlobs, a writer's merged
// buffers) saves a system call per request: on the io_uring engine a
// batch of 64 reads costs one io_uring_enter, not 64.
func SubmitBatch(q Queue, rs []Request) (int, error) {
	if b, ok := q.(Batcher); ok && len(rs) > 1 {
		return b.SubmitBatch(rs)
	}
	for i, r := range rs {
		if err := q.Submit(r); err != nil {
			return i, err
		}
	}
	return len(rs), nil
}
