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
}
