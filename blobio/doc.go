// Package blobio writes and reads files of variable-sized blobs in the
// format of Neon's pageserver (blob_io.rs), through aligned buffers and
// O_DIRECT where the filesystem allows it.
//
// Each blob is a header and its bytes. An uncompressed blob shorter than 128
// bytes has a 1-byte header holding its length (high bit clear). Any other
// blob has a 4-byte big-endian header: bit 31 set, bits 28-30 the
// compression (0x8_ in the first byte for none, 0x9_ for zstd), bits 0-27
// the stored length. A blob is addressed by the offset of its header.
//
// A Writer fills one buffer while the previous ones are written, so the
// caller waits for the device only when every buffer is in flight. A Reader
// reads single blobs with aligned reads; a Scanner walks every blob in order
// with a read-ahead buffer in flight.
package blobio
