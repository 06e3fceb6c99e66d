package direct

// FixedOps returns how many requests q, an io_uring queue, issued with
// READ_FIXED or WRITE_FIXED.
func FixedOps(q Queue) int {
	u := q.(*uringQueue)
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.fixedOps
}
