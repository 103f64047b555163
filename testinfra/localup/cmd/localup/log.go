package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// newLineLogger returns a logger printing one plain line per message for people watching
// `make up`: "15:04:05 member ready cluster=m1 elapsed=5.7s". Only V(0) messages are shown.
func newLineLogger(w io.Writer) logr.Logger {
	return logr.New(&lineSink{w: w, mu: &sync.Mutex{}})
}

type lineSink struct {
	w      io.Writer
	mu     *sync.Mutex
	name   string
	values []any
}

func (s *lineSink) Init(logr.RuntimeInfo)  {}
func (s *lineSink) Enabled(level int) bool { return level == 0 }

func (s *lineSink) Info(_ int, msg string, kv ...any) { s.write(msg, nil, kv) }

func (s *lineSink) Error(err error, msg string, kv ...any) { s.write(msg, err, kv) }

func (s *lineSink) WithValues(kv ...any) logr.LogSink {
	c := *s
	c.values = append(append([]any(nil), s.values...), kv...)
	return &c
}

func (s *lineSink) WithName(name string) logr.LogSink {
	c := *s
	if c.name != "" {
		name = c.name + "/" + name
	}
	c.name = name
	return &c
}

func (s *lineSink) write(msg string, err error, kv []any) {
	var b strings.Builder
	b.WriteString(time.Now().Format("15:04:05 "))
	if s.name != "" {
		b.WriteString(s.name + ": ")
	}
	b.WriteString(msg)
	all := append(append([]any(nil), s.values...), kv...)
	for i := 0; i+1 < len(all); i += 2 {
		fmt.Fprintf(&b, " %v=%v", all[i], all[i+1])
	}
	if err != nil {
		fmt.Fprintf(&b, " error=%q", err.Error())
	}
	b.WriteByte('\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = io.WriteString(s.w, b.String())
}
