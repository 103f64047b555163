package bfeconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"sort"
)

// Group is a set of files that BFE reloads together through one monitor URL.
type Group string

const (
	// ServerData is host_rule, vip_rule, route_rule and cluster_conf, reloaded all-or-nothing by
	// /reload/server_data_conf.
	ServerData Group = "server_data_conf"
	// GslbData is gslb and cluster_table, reloaded by /reload/gslb_data_conf (not atomic in BFE: a
	// cross-reference error is reported but the new data is applied anyway).
	GslbData Group = "gslb_data_conf"
)

// Dir is the directory (relative to a configuration root) that holds the group's files. The
// basenames below must match the ones named in bfe.conf: a reload with ?path=<dir> makes BFE read
// <dir>/<basename of each configured file>.
func (g Group) Dir() string {
	if g == GslbData {
		return "cluster_conf"
	}
	return "server_data_conf"
}

// Paths of the files relative to a configuration root.
const (
	HostRulePath     = "server_data_conf/host_rule.data"
	VipRulePath      = "server_data_conf/vip_rule.data"
	RouteRulePath    = "server_data_conf/route_rule.data"
	ClusterConfPath  = "server_data_conf/cluster_conf.data"
	NameConfPath     = "server_data_conf/name_conf.data"
	ClusterTablePath = "cluster_conf/cluster_table.data"
	GslbPath         = "cluster_conf/gslb.data"
)

// GroupOf returns the reload group a file (relative path) belongs to. name_conf is reloaded by its
// own URL and never changes, so it reports ok=false.
func GroupOf(rel string) (Group, bool) {
	switch rel {
	case HostRulePath, VipRulePath, RouteRulePath, ClusterConfPath:
		return ServerData, true
	case ClusterTablePath, GslbPath:
		return GslbData, true
	}
	return "", false
}

// Set is the complete routing and balancing configuration managed by the driver.
type Set struct {
	HostRule     HostRuleConf
	VipRule      VipRuleConf
	RouteRule    RouteRuleConf
	ClusterConf  ClusterConf
	NameConf     NameConf
	ClusterTable ClusterTableConf
	Gslb         GslbConf
}

// Files maps a path relative to the configuration root to the file content.
type Files map[string][]byte

// Paths returns the file paths in sorted order.
func (f Files) Paths() []string {
	out := make([]string, 0, len(f))
	for p := range f {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// GroupEqual reports whether both file sets have byte-identical files for group g.
func (f Files) GroupEqual(other Files, g Group) bool {
	for _, p := range allPaths {
		if gg, ok := GroupOf(p); !ok || gg != g {
			continue
		}
		if !bytes.Equal(f[p], other[p]) {
			return false
		}
	}
	return true
}

var allPaths = []string{HostRulePath, VipRulePath, RouteRulePath, ClusterConfPath, NameConfPath, ClusterTablePath, GslbPath}

func (s *Set) fields() []struct {
	path string
	v    any
} {
	return []struct {
		path string
		v    any
	}{
		{HostRulePath, &s.HostRule},
		{VipRulePath, &s.VipRule},
		{RouteRulePath, &s.RouteRule},
		{ClusterConfPath, &s.ClusterConf},
		{NameConfPath, &s.NameConf},
		{ClusterTablePath, &s.ClusterTable},
		{GslbPath, &s.Gslb},
	}
}

// Render encodes every file. Output is deterministic: encoding/json sorts map keys, and callers keep
// slices in a canonical order.
func (s *Set) Render() (Files, error) {
	out := make(Files, len(allPaths))
	for _, f := range s.fields() {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		// Conditions contain "&&"; keep them readable instead of \u0026.
		enc.SetEscapeHTML(false)
		if err := enc.Encode(f.v); err != nil {
			return nil, fmt.Errorf("render %s: %w", f.path, err)
		}
		out[f.path] = buf.Bytes()
	}
	return out, nil
}

// Parse decodes a complete file set strictly: unknown (e.g. misspelled) fields and trailing data are
// errors, although BFE itself silently ignores both.
func Parse(files Files) (*Set, error) {
	s := &Set{}
	var errs []error
	for _, f := range s.fields() {
		b, ok := files[f.path]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: missing", f.path))
			continue
		}
		if err := DecodeStrict(b, f.v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.path, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// ParseGroup decodes only the files of group g into a fresh Set.
func ParseGroup(files Files, g Group) (*Set, error) {
	s := &Set{}
	var errs []error
	for _, f := range s.fields() {
		if gg, ok := GroupOf(f.path); !ok || gg != g {
			continue
		}
		b, ok := files[f.path]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: missing", f.path))
			continue
		}
		if err := DecodeStrict(b, f.v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.path, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// DecodeStrict decodes one JSON value into v, rejecting unknown fields and anything after the value.
func DecodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("decode: trailing data after the JSON value")
	}
	return nil
}
