// Package fakebfe is a stand-in for a BFE process's monitor port, for tests that cannot run BFE: it
// serves /reload/server_data_conf and /reload/gslb_data_conf with ?path=<dir> and the
// /monitor/*_version endpoints with BFE's answers — HTTP 200 always, exactly {"error":null} on
// success, an unescaped {"error":"..."} otherwise — and BFE's semantics: server data is
// all-or-nothing, GSLB data with a cross-reference error is reported as failed but applied anyway.
//
// It loads the files like BFE 1.8.5 does (first JSON value only, unknown keys ignored, missing
// required keys refused, BFE's defaults for absent cluster settings) and refuses what BFE refuses
// (bfeconf's checks, minus the ones marked bfeconf.PolicyError: those it accepts, like BFE, and
// lists in Policy). Route answers the question "which cluster would BFE send this request to" with
// BFE's lookup (basic-rule tree, ADVANCED_MODE, product rules, GSLB data, instance dialing), so
// routing tests run without the binary. Unlike BFE it also watches every state it serves and
// records each moment a route pointed at a cluster without balancing data (BFE answers 500 then).
package fakebfe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
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
	policy    []string
	routes    map[string]*productRoutes // product → BFE's route lookup structures
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

// Policy returns every refusal of this project's own policy that the fake saw in data it accepted
// (BFE accepts them too; the driver's validator refuses them). Each entry names the reload.
func (f *BFE) Policy() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.policy...)
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
	f.routes = buildRoutes(s)
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
	set, notes, err := loadDir(dir, g)
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
		bfeErrs, policy := bfeconf.SplitPolicy(set.ValidateServerData())
		if len(bfeErrs) > 0 {
			return errors.Join(bfeErrs...).Error()
		}
		f.notePolicy(g, dir, append(notes, policy...))
		f.server = set
		f.routes = buildRoutes(set)
	case bfeconf.GslbData:
		// Self-consistency errors refuse the data; a cluster missing from the cluster table is
		// reported but applied (BFE's BalTableReload behaviour).
		var missing []string
		for c := range set.Gslb.Clusters {
			if _, ok := set.ClusterTable.Config[c]; !ok {
				missing = append(missing, c)
			}
		}
		sort.Strings(missing)
		if len(missing) == 0 {
			bfeErrs, policy := bfeconf.SplitPolicy(set.ValidateGslbData())
			if len(bfeErrs) > 0 {
				return errors.Join(bfeErrs...).Error()
			}
			f.notePolicy(g, dir, append(notes, policy...))
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

func (f *BFE) notePolicy(g bfeconf.Group, dir string, policy []error) {
	for _, err := range policy {
		f.policy = append(f.policy, fmt.Sprintf("%s from %s: %v", g, dir, err))
	}
}

// loadDir reads group g's files from dir by basename, as a ?path= reload does, decoding them the
// way BFE does: only the first JSON value counts (trailing bytes are ignored), unknown keys are
// ignored, a missing required key is an error (BFE's "no Version" and the like), and absent
// cluster_conf settings take BFE's defaults.
func loadDir(dir string, g bfeconf.Group) (*bfeconf.Set, []error, error) {
	s := &bfeconf.Set{}
	var notes []error
	type target struct {
		name     string
		v        any
		required []string
		prefix   string // BFE's prefix for a missing key
	}
	var targets []target
	if g == bfeconf.ServerData {
		targets = []target{
			{"host_rule.data", &s.HostRule, []string{"Version", "Hosts", "HostTags"}, ""},
			{"vip_rule.data", &s.VipRule, []string{"Version"}, ""},
			{"route_rule.data", &s.RouteRule, []string{"Version"}, ""},
			{"cluster_conf.data", &s.ClusterConf, []string{"Version", "Config"}, ""},
		}
	} else {
		targets = []target{
			{"cluster_table.data", &s.ClusterTable, []string{"Version", "Config"}, ""},
			{"gslb.data", &s.Gslb, []string{"Clusters", "Hostname", "Ts"}, "Check Nil: "},
		}
	}
	for _, t := range targets {
		b, err := os.ReadFile(filepath.Join(dir, t.name))
		if err != nil {
			return nil, nil, err
		}
		var raw map[string]json.RawMessage
		dec := json.NewDecoder(bytes.NewReader(b))
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", t.name, err)
		}
		if len(bytes.TrimSpace(b[dec.InputOffset():])) > 0 {
			notes = append(notes, &bfeconf.PolicyError{Err: fmt.Errorf("%s: trailing bytes after the JSON value", t.name)})
		}
		for _, k := range t.required {
			if v, ok := raw[k]; !ok || string(v) == "null" {
				return nil, nil, fmt.Errorf("%sno %s", t.prefix, k)
			}
		}
		switch v := t.v.(type) {
		case *bfeconf.ClusterConf:
			var defaulted []error
			defaulted, err = decodeClusterConf(raw, v)
			notes = append(notes, defaulted...)
		case *bfeconf.ClusterTableConf:
			err = decodeClusterTable(raw, v)
		default:
			err = decodeFirst(b, v)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", t.name, err)
		}
	}
	return s, notes, nil
}

// decodeFirst decodes the first JSON value of b, ignoring anything after it, as BFE's loaders do.
func decodeFirst(b []byte, v any) error {
	return json.NewDecoder(bytes.NewReader(b)).Decode(v)
}

// bfeDefaults are the settings BFE gives a cluster_conf entry for absent keys (bfe.md §3).
func bfeDefaults() bfeconf.Cluster {
	return bfeconf.Cluster{
		BackendConf: bfeconf.BackendConf{Protocol: "http", TimeoutConnSrv: 2000, TimeoutResponseHeader: 60000, MaxIdleConnsPerHost: 2},
		CheckConf:   bfeconf.CheckConf{Schem: "http", Uri: "/health_check", FailNum: 5, CheckInterval: 1000},
		GslbBasic:   bfeconf.GslbBasic{RetryMax: 2, BalanceMode: "WRR", HashConf: bfeconf.HashConf{HashStrategy: bfeconf.HashClientIP}},
		ClusterBasic: bfeconf.ClusterBasic{TimeoutReadClient: 30000, TimeoutWriteClient: 60000, TimeoutReadClientAgain: 60000,
			ReqWriteBufferSize: 512},
	}
}

// decodeClusterConf applies BFE's defaults to absent settings and notes each entry that relies on
// them (the driver writes every block explicitly).
func decodeClusterConf(raw map[string]json.RawMessage, c *bfeconf.ClusterConf) ([]error, error) {
	if err := json.Unmarshal(raw["Version"], &c.Version); err != nil {
		return nil, err
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(raw["Config"], &entries); err != nil {
		return nil, err
	}
	var notes []error
	c.Config = make(map[string]bfeconf.Cluster, len(entries))
	for _, name := range sortedNames(entries) {
		b := entries[name]
		cl := bfeDefaults() // decoding over the defaults keeps them for absent keys
		if err := json.Unmarshal(b, &cl); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", name, err)
		}
		var blocks map[string]json.RawMessage
		_ = json.Unmarshal(b, &blocks)
		for _, k := range []string{"BackendConf", "CheckConf", "GslbBasic", "ClusterBasic"} {
			if _, ok := blocks[k]; !ok {
				notes = append(notes, &bfeconf.PolicyError{Err: fmt.Errorf("cluster_conf.data: cluster[%s]: %s is absent, BFE uses its defaults", name, k)})
			}
		}
		c.Config[name] = cl
	}
	return notes, nil
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func decodeClusterTable(raw map[string]json.RawMessage, t *bfeconf.ClusterTableConf) error {
	if err := json.Unmarshal(raw["Version"], &t.Version); err != nil {
		return err
	}
	var config map[string]map[string][]map[string]json.RawMessage
	if err := json.Unmarshal(raw["Config"], &config); err != nil {
		return err
	}
	t.Config = make(map[string]map[string][]bfeconf.Instance, len(config))
	for cluster, subs := range config {
		t.Config[cluster] = make(map[string][]bfeconf.Instance, len(subs))
		for sub, instances := range subs {
			list := make([]bfeconf.Instance, len(instances))
			for i, in := range instances {
				for _, k := range []string{"Name", "Addr", "Port", "Weight"} {
					if v, ok := in[k]; !ok || string(v) == "null" {
						return fmt.Errorf("ClusterTableConf.Config:%s %s %d no %s", cluster, sub, i, k)
					}
				}
				b, _ := json.Marshal(in)
				if err := json.Unmarshal(b, &list[i]); err != nil {
					return err
				}
			}
			t.Config[cluster][sub] = list
		}
	}
	return nil
}

func load(root string, g bfeconf.Group) (*bfeconf.Set, error) {
	s, _, err := loadDir(filepath.Join(root, g.Dir()), g)
	return s, err
}
