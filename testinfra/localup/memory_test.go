package localup

import (
	"os"
	"testing"

	. "github.com/onsi/gomega"
)

func TestMemoryOf(t *testing.T) {
	g := NewWithT(t)
	rss, hwm := MemoryOf(os.Getpid(), "VmRSS"), MemoryOf(os.Getpid(), "VmHWM")
	g.Expect(rss).To(BeNumerically(">", 1<<20), "this test process's resident set, in bytes")
	g.Expect(hwm).To(BeNumerically(">=", rss), "the peak is at least the current")
	g.Expect(MemoryOf(os.Getpid(), "NoSuchField")).To(BeZero())
	g.Expect(MemoryOf(-1, "VmRSS")).To(BeZero(), "no such process")
}
