package alteonsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ControlHandler serves out-of-band knobs for a running pair (used by cmd/alteon-sim and demos;
// the device itself has no such API):
//
//	GET  /roles                        {"alteon-a":"master","alteon-b":"backup"}
//	POST /failover                     move mastership to the other unit
//	PUT  /roles?a=master&b=master      force roles (split brain, both backup, …)
//	POST /faults?device=<name>         install a Fault (JSON; Hook unsupported; Delay in Go syntax)
//	DELETE /faults?device=<name>       remove every fault of the unit
//	POST /apply-fault?device=<name>    queue an ApplyFault {"fail":"text","hang":true,"earlyComplete":"1s"}
//	POST /release-apply?device=<name>  finish hanging applies
//	POST /save-fault?device=<name>     make the next save fail {"fail":"text"}
//	POST /reboot?device=<name>         reboot the unit: what was not saved is lost
//	GET  /stats                        per-unit applies, saves, syncs, request counts, data plane
func ControlHandler(p *Pair) http.Handler {
	mux := http.NewServeMux()
	unit := func(w http.ResponseWriter, r *http.Request) *Device {
		name := r.URL.Query().Get("device")
		for _, d := range p.Units() {
			if d.Name() == name || (len(name) == 1 && strings.HasSuffix(d.Name(), "-"+name)) {
				return d
			}
		}
		http.Error(w, fmt.Sprintf("unknown device %q", name), http.StatusNotFound)
		return nil
	}
	roles := func(w http.ResponseWriter) {
		writeJSON(w, http.StatusOK, map[string]string{p.A.Name(): string(p.A.Role()), p.B.Name(): string(p.B.Role())})
	}
	mux.HandleFunc("GET /roles", func(w http.ResponseWriter, r *http.Request) { roles(w) })
	mux.HandleFunc("PUT /roles", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		a, b := Role(q.Get("a")), Role(q.Get("b"))
		for _, x := range []Role{a, b} {
			if x != RoleMaster && x != RoleBackup && x != RoleInit {
				http.Error(w, "roles must be master, backup or init", http.StatusBadRequest)
				return
			}
		}
		p.SetRoles(a, b)
		roles(w)
	})
	mux.HandleFunc("POST /failover", func(w http.ResponseWriter, r *http.Request) {
		p.Failover()
		roles(w)
	})
	mux.HandleFunc("POST /faults", func(w http.ResponseWriter, r *http.Request) {
		d := unit(w, r)
		if d == nil {
			return
		}
		var in struct {
			Fault
			Kind  string `json:"kind"`
			Delay string `json:"delay"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		kind, ok := faultKinds[strings.ToLower(in.Kind)]
		if !ok {
			http.Error(w, fmt.Sprintf("unknown fault kind %q", in.Kind), http.StatusBadRequest)
			return
		}
		f := in.Fault
		f.Kind = kind
		f.Hook = nil
		if in.Delay != "" {
			dur, err := time.ParseDuration(in.Delay)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			f.Delay = dur
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": d.AddFault(f)})
	})
	mux.HandleFunc("DELETE /faults", func(w http.ResponseWriter, r *http.Request) {
		if d := unit(w, r); d != nil {
			d.ClearFaults()
			writeJSON(w, http.StatusOK, okBody)
		}
	})
	mux.HandleFunc("POST /apply-fault", func(w http.ResponseWriter, r *http.Request) {
		d := unit(w, r)
		if d == nil {
			return
		}
		var in struct {
			Fail          string `json:"fail"`
			Hang          bool   `json:"hang"`
			EarlyComplete string `json:"earlyComplete"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f := ApplyFault{Fail: in.Fail, Hang: in.Hang}
		if in.EarlyComplete != "" {
			dur, err := time.ParseDuration(in.EarlyComplete)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			f.EarlyComplete = dur
		}
		d.InjectApply(f)
		writeJSON(w, http.StatusOK, okBody)
	})
	mux.HandleFunc("POST /release-apply", func(w http.ResponseWriter, r *http.Request) {
		if d := unit(w, r); d != nil {
			d.ReleaseApply()
			writeJSON(w, http.StatusOK, okBody)
		}
	})
	mux.HandleFunc("POST /save-fault", func(w http.ResponseWriter, r *http.Request) {
		d := unit(w, r)
		if d == nil {
			return
		}
		var in struct {
			Fail string `json:"fail"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Fail == "" {
			http.Error(w, `body must be {"fail":"text"}`, http.StatusBadRequest)
			return
		}
		d.InjectSaveFailure(in.Fail)
		writeJSON(w, http.StatusOK, okBody)
	})
	mux.HandleFunc("POST /reboot", func(w http.ResponseWriter, r *http.Request) {
		if d := unit(w, r); d != nil {
			d.Reboot()
			writeJSON(w, http.StatusOK, okBody)
		}
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		out := map[string]any{}
		for _, d := range p.Units() {
			out[d.Name()] = map[string]any{
				"role":      d.Role(),
				"applies":   d.Applies(),
				"saves":     d.Saves(),
				"syncs":     d.Syncs(),
				"requests":  d.RequestCounts(),
				"listening": d.Listening(),
				"served":    d.Served(),
			}
		}
		writeJSON(w, http.StatusOK, out)
	})
	return mux
}

var faultKinds = map[string]FaultKind{
	"latency":          FaultLatency,
	"status":           FaultStatus,
	"unauthorized":     FaultUnauthorized,
	"errorok":          FaultErrorOK,
	"reset":            FaultReset,
	"resetafter":       FaultResetAfter,
	"emptybody":        FaultEmptyBody,
	"malformedjson":    FaultMalformedJSON,
	"numbersasstrings": FaultNumbersAsStrings,
}
