// Package aligned provides I/O buffers whose address and length satisfy the
// alignment rules of direct I/O, and a Pool that hands them out under a byte
// budget.
//
// On unix a Buffer's memory comes from an anonymous mmap: it is page aligned,
// lives outside the Go heap, is never moved, and may be handed to the kernel
// while an asynchronous I/O is in flight. Free returns it at once; a cleanup
// attached with runtime.AddCleanup unmaps a Buffer that was dropped without
// Free, as a safety net rather than as the way to release memory.
//
// The rounding helpers (Up, Down, IsAligned, IsSliceAligned, PadZero) are the
// arithmetic every direct-I/O caller repeats.
package aligned
