package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dio-storage/dio/internal/testenv"
)

func TestUnwritableDirectory(t *testing.T) {
	ro, _ := testenv.ReadOnlyDir(t, testenv.Dir(t))
	_, stderr, code := dioCheck(t, ro)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "cannot create a file")
	// Under -json, an object says so too, in the probe and the bench.
	requireDirError(t, []string{"-json", ro}, ro)
	requireDirError(t, []string{"bench", "-json", "-size", "4MiB", "-duration", "20ms", "-runs", "1", "-fio=false", ro}, ro)
}
