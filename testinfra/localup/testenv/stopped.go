package testenv

import (
	"bytes"
	"runtime/pprof"
	"testing"
	"time"
)

// StopWait is how long WaitStopped waits: longer than controller-runtime's default graceful
// shutdown (30 s), so that a manager whose runnables overstay it returns that error instead of
// racing the test's own deadline.
const StopWait = 45 * time.Second

// WaitStopped waits for a manager's Start (done) to return after its context was cancelled. A
// manager still running, or one that gave up on its runnables, is reported with the stacks of
// every goroutine: they name what did not stop.
func WaitStopped(t testing.TB, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("manager: %v\n%s", err, goroutines())
		}
	case <-time.After(StopWait):
		t.Errorf("manager did not stop within %s\n%s", StopWait, goroutines())
	}
}

func goroutines() []byte {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	return b.Bytes()
}
