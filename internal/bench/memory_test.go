package bench

import (
	"context"
	"os"
	"testing"
)

// TestReadMemorySplitsRSS reads this process: RSS is its anonymous and
// file parts (the kernel counts shmem apart: none here).
func TestReadMemorySplitsRSS(t *testing.T) {
	s := readMemory(context.Background(), &agent{pid: os.Getpid()})
	if s.RSSBytes == 0 || s.RSSAnonBytes == 0 || s.RSSFileBytes == 0 {
		t.Fatalf("got %+v", s)
	}
	if d := int64(s.RSSBytes) - int64(s.RSSAnonBytes+s.RSSFileBytes); d < -(1<<20) || d > 1<<20 {
		t.Errorf("RSS %d is not anon %d + file %d", s.RSSBytes, s.RSSAnonBytes, s.RSSFileBytes)
	}
	if s.HeapBytes != 0 {
		t.Errorf("heap %d read without /metrics", s.HeapBytes)
	}
}
