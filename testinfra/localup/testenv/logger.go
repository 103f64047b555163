package testenv

import (
	"flag"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// ControllerLogger is the logger for controllers a test package runs in-process: errors always,
// informational lines only with `go test -v` or LBFED_TEST_LOGS=1. A failing package prints
// everything it wrote, and thousands of "Starting EventSource" lines from every test before it
// buried the one line that said what failed.
func ControllerLogger() logr.Logger {
	return logr.New(quietSink{klog.NewKlogr().GetSink()})
}

type quietSink struct{ logr.LogSink }

func (s quietSink) Enabled(level int) bool {
	// Asked per line, after the test flags are parsed (testing.Verbose panics before).
	if !flag.Parsed() || (!testing.Verbose() && os.Getenv("LBFED_TEST_LOGS") == "") {
		return false
	}
	return s.LogSink.Enabled(level)
}

func (s quietSink) WithValues(kv ...any) logr.LogSink { return quietSink{s.LogSink.WithValues(kv...)} }
func (s quietSink) WithName(name string) logr.LogSink { return quietSink{s.LogSink.WithName(name)} }

// WithCallDepth keeps klog's file:line pointing at the caller.
func (s quietSink) WithCallDepth(depth int) logr.LogSink {
	if d, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return quietSink{d.WithCallDepth(depth)}
	}
	return s
}
