package localup

import (
	"os"
	"runtime"
	"testing"

	. "github.com/onsi/gomega"
)

func TestMemoryOf(t *testing.T) {
	g := NewWithT(t)
	// 64 MiB touched and kept resident while both are read. The two reads are two snapshots: the
	// kernel may report a peak a little below a current read just before (its per-thread RSS
	// counters are folded in lazily), so each is compared with what is known to be resident.
	const touched = 64 << 20
	buf := make([]byte, touched)
	for i := 0; i < len(buf); i += os.Getpagesize() {
		buf[i] = 1
	}
	rss, hwm := MemoryOf(os.Getpid(), "VmRSS"), MemoryOf(os.Getpid(), "VmHWM")
	runtime.KeepAlive(buf)
	g.Expect(rss).To(BeNumerically(">=", touched), "this test process's resident set, in bytes")
	g.Expect(hwm).To(BeNumerically(">=", touched), "its peak, in bytes")
	g.Expect(MemoryOf(os.Getpid(), "NoSuchField")).To(BeZero())
	g.Expect(MemoryOf(-1, "VmRSS")).To(BeZero(), "no such process")
}
