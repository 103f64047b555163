// Package fakebfe is a stand-in for a BFE process's monitor port, for tests that cannot run BFE: it
// serves /reload/server_data_conf and /reload/gslb_data_conf with ?path=<dir> and the
// /monitor/*_version endpoints with BFE's answers — HTTP 200 always, exactly {"error":null} on
// success, an unescaped {"error":"..."} otherwise — and BFE's semantics: server data is
// all-or-nothing, GSLB data with a cross-reference error is reported as failed but applied anyway.
//
// It loads the files like BFE does (lenient JSON, unknown keys ignored) and checks them with
// bfeconf's mirror of BFE's checks. Unlike BFE it also watches every state it serves and records
// each moment a route pointed at a cluster without balancing data (BFE would answer 500 then).
package fakebfe

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"

	"github.com/lbfed/lbfed/elb/bfe/bfeconf"
)

// Reload is one reload request as the fake saw it.
type Reload struct {
	Group bfeconf.Group
	Dir   string
	Body  string
}

// BFE is a fake BFE monitor server.
type BFE struct {
	*httptest.Server

	mu        sync.Mutex
	server    *bfeconf.Set // active server data (nil before the first load)
	gslb      *bfeconf.Set // active GSLB data
	reloads   []Reload
	unsafe    []string
	failNext  map[bfeconf.Group][]string
	monitorOK bool
}

// New starts a fake BFE on a loopback port. Close it when done.
func New() *BFE {
	f := &BFE{failNext: map[bfeconf.Group][]string{}, monitorOK: true}
	mux := http.NewServeMux()
	mux.HandleFunc("/reload/server_data_conf", func(w http.ResponseWriter, r *http.Request) {
		f.answer(w, f.reload(bfeconf.ServerData, r.URL.Query().Get("path")))
	})
	mux.HandleFunc("/reload/gslb_data_conf", func(w http.ResponseWriter, r *http.Request) {
		f.answer(w, f.reload(bfeconf.GslbData, r.URL.Query().Get("path")))
	})
	mux.HandleFunc("/reload/", func(w http.ResponseWriter, r *http.Request) {
		f.answer(w, fmt.Sprintf("handler not exist, type[reload], command[%s]", filepath.Base(r.URL.Path)))
	})
	mux.HandleFunc("/monitor/host_table_version", func(w http.ResponseWriter, _ *http.Request) {
		f.monitor(w, func() any {
			var s bfeconf.Set
			if f.server != nil {
				s = *f.server
			}
			return map[string]string{"HostTag": s.HostRule.Version, "Vip": s.VipRule.Version, "ProductRoute": s.RouteRule.Version}
		})
	})
	mux.HandleFunc("/monitor/cluster_table_version", func(w http.ResponseWriter, _ *http.Request) {
		f.monitor(w, func() any {
			v := ""
			if f.server != nil {
				v = f.server.ClusterConf.Version
			}
			return map[string]string{"ClusterConfVer": v}
		})
	})
	mux.HandleFunc("/monitor/bal_table_version", func(w http.ResponseWriter, _ *http.Request) {
		f.monitor(w, func() any {
			var s bfeconf.Set
			if f.gslb != nil {
				s = *f.gslb
			}
			return map[string]string{"ClusterTableConfVer": s.ClusterTable.Version, "GslbConfTimeStamp": s.Gslb.Ts, "GslbConfSrc": s.Gslb.Hostname}
		})
	})
	f.Server = httptest.NewServer(mux)
	return f
}

// FailNext makes the next reload of group g fail with body (BFE's message, inserted unescaped). For
// GslbData the new data is applied anyway, as BFE does for cross-reference errors.
func (f *BFE) FailNext(g bfeconf.Group, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext[g] = append(f.failNext[g], body)
}

// SetMonitorAvailable makes the /monitor endpoints answer 500 while false.
func (f *BFE) SetMonitorAvailable(ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.monitorOK = ok
}

// Reloads returns the reloads received so far.
func (f *BFE) Reloads() []Reload {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Reload(nil), f.reloads...)
}

// Unsafe returns a description of every moment a route pointed at an unbalanced cluster.
func (f *BFE) Unsafe() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.unsafe...)
}

// Active returns copies of what the fake serves: server data and GSLB data (nil before loaded).
func (f *BFE) Active() (server, gslb *bfeconf.Set) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.server, f.gslb
}

// Load sets the active configuration from a configuration root without checks, as BFE's startup
// does with the files named in bfe.conf.
func (f *BFE) Load(root string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := load(root, bfeconf.ServerData)
	if err != nil {
		return err
	}
	g, err := load(root, bfeconf.GslbData)
	if err != nil {
		return err
	}
	f.server, f.gslb = s, g
	return nil
}

func (f *BFE) answer(w http.ResponseWriter, errMsg string) {
	w.WriteHeader(http.StatusOK)
	if errMsg == "" {
		fmt.Fprint(w, `{"error":null}`)
		return
	}
	fmt.Fprintf(w, `{"error":"%s"}`, errMsg) // unescaped, like BFE
}

func (f *BFE) monitor(w http.ResponseWriter, body func() any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.monitorOK {
		http.Error(w, "monitor unavailable", http.StatusInternalServerError)
		return
	}
	_ = json.NewEncoder(w).Encode(body())
}

// reload returns "" on success, else BFE's error message.
func (f *BFE) reload(g bfeconf.Group, dir string) (errMsg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer func() { f.reloads = append(f.reloads, Reload{Group: g, Dir: dir, Body: errMsg}) }()
	if dir == "" {
		return "path is required by this fake"
	}
	set, err := loadDir(dir, g)
	if err != nil {
		return err.Error()
	}
	var injected string
	if q := f.failNext[g]; len(q) > 0 {
		injected, f.failNext[g] = q[0], q[1:]
	}
	switch g {
	case bfeconf.ServerData:
		if injected != "" {
			return injected
		}
		if err := set.ValidateServerData(); err != nil {
			return err.Error()
		}
		f.server = set
	case bfeconf.GslbData:
		// Self-consistency errors refuse the data; a cluster missing from the cluster table is
		// reported but applied (BFE's BalTableReload behaviour).
		var missing []string
		for c := range set.Gslb.Clusters {
			if _, ok := set.ClusterTable.Config[c]; !ok {
				missing = append(missing, c)
			}
		}
		if len(missing) == 0 {
			if err := set.ValidateGslbData(); err != nil {
				return err.Error()
			}
		}
		f.gslb = set
		if len(missing) > 0 {
			errMsg = fmt.Sprintf("error in BalTableReload() for %v", missing)
		} else {
			errMsg = injected
		}
	}
	if f.server != nil && f.gslb != nil {
		if err := bfeconf.CheckRoutable(f.server, f.gslb); err != nil {
			f.unsafe = append(f.unsafe, fmt.Sprintf("after %s from %s: %v", g, dir, err))
		}
	}
	return errMsg
}

// loadDir reads group g's files from dir by basename, as a ?path= reload does.
func loadDir(dir string, g bfeconf.Group) (*bfeconf.Set, error) {
	s := &bfeconf.Set{}
	var targets map[string]any
	if g == bfeconf.ServerData {
		targets = map[string]any{"host_rule.data": &s.HostRule, "vip_rule.data": &s.VipRule,
			"route_rule.data": &s.RouteRule, "cluster_conf.data": &s.ClusterConf}
	} else {
		targets = map[string]any{"cluster_table.data": &s.ClusterTable, "gslb.data": &s.Gslb}
	}
	var errs []error
	for name, v := range targets {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// BFE decodes leniently: unknown keys are ignored.
		if err := json.Unmarshal(b, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return s, errors.Join(errs...)
}

func load(root string, g bfeconf.Group) (*bfeconf.Set, error) {
	return loadDir(filepath.Join(root, g.Dir()), g)
}
