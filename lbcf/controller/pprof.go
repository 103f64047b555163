package controller

import (
	"net/http"
	"net/http/pprof"
)

// ProfilingHandlers are the net/http/pprof endpoints, for a metrics server's ExtraHandlers when
// profiling is switched on (never by default: they are sensitive and cost CPU when used).
func ProfilingHandlers() map[string]http.Handler {
	return map[string]http.Handler{
		"/debug/pprof/":        http.HandlerFunc(pprof.Index),
		"/debug/pprof/cmdline": http.HandlerFunc(pprof.Cmdline),
		"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
		"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
		"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
	}
}
