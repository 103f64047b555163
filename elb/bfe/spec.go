package bfe

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/lbfed/lbfed/elb/bfe/bfeconf"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// Keys of a BFE LoadBalancer's lbSpec (and of the lbInfo the driver returns, which adds the name).
const (
	SpecHost   = "host"
	SpecPath   = "path"
	SpecCookie = "cookie"
	SpecHeader = "header"
	// SpecName optionally names the BFE cluster; by default it is derived from the route.
	SpecName = "name"
)

// Backend parameters understood by the driver.
const (
	// ParamWeight is the instance weight, an integer 0..MaxWeight (default DefaultWeight).
	ParamWeight = lbcfv1beta1.ParamWeight
	// ParamCluster is the member cluster, added by the federation; it selects the sub-cluster.
	ParamCluster = lbcfv1beta1.ParamCluster
	// ParamClusterWeight is the GSLB weight of the backend's member cluster (its sub-cluster), an
	// integer 0..MaxWeight with ingress-bfe balance.weight semantics. It is set per member, e.g. by a
	// Karmada OverridePolicy on the BackendGroup's parameters.
	ParamClusterWeight = "lbfed.io/cluster-weight"
	// ParamSubset names the subset of the LoadBalancer's traffic the backend serves, and
	// ParamSubsetWeight (0..MaxWeight, default 1) that subset's share: ingress-bfe's
	// balance.weight across Services, each Service a subset spread over its member clusters as the
	// member weights say. Set by the MultiClusterIngress front door (package frontdoor/mci).
	ParamSubset       = "lbfed.io/subset"
	ParamSubsetWeight = "lbfed.io/subset-weight"
)

// Weight bounds.
const (
	DefaultWeight = 10
	MaxWeight     = 10000
)

var specKeys = []string{SpecCookie, SpecHeader, SpecHost, SpecName, SpecPath}

// ParseLoadBalancer reads a LoadBalancer from an lbSpec or lbInfo map. Unknown keys are rejected so
// that a misspelled key ("hots", "cookies") fails at admission instead of being silently ignored.
func ParseLoadBalancer(spec map[string]string) (LoadBalancer, error) {
	var errs []error
	for _, k := range sortedMemberNames(spec) {
		if !slices.Contains(specKeys, k) {
			errs = append(errs, fmt.Errorf("unknown lbSpec key %q (known: %s)", k, strings.Join(specKeys, ", ")))
		}
	}
	lb := LoadBalancer{Host: strings.ToLower(strings.TrimSpace(spec[SpecHost])), Path: spec[SpecPath]}
	if lb.Host == "" {
		errs = append(errs, errors.New("lbSpec.host is required"))
	} else if err := bfeconf.CheckHostname(lb.Host); err != nil {
		errs = append(errs, fmt.Errorf("lbSpec.host: %w", err))
	}
	if lb.Path == "" {
		lb.Path = "/*"
	}
	if err := checkPath(lb.Path); err != nil {
		errs = append(errs, fmt.Errorf("lbSpec.path: %w", err))
	}
	var err error
	if v, ok := spec[SpecCookie]; ok {
		if lb.Cookie, err = parseMatch(v); err != nil {
			errs = append(errs, fmt.Errorf("lbSpec.cookie: %w", err))
		}
	}
	if v, ok := spec[SpecHeader]; ok {
		if lb.Header, err = parseMatch(v); err != nil {
			errs = append(errs, fmt.Errorf("lbSpec.header: %w", err))
		}
	}
	if strings.HasPrefix(lb.Host, "*.") && (lb.Cookie != nil || lb.Header != nil) {
		errs = append(errs, errors.New("cookie and header conditions need an exact host or \"*\", not a \"*.\" wildcard"))
	}
	lb.Name = spec[SpecName]
	if lb.Name == "" {
		lb.Name = derivedName(&lb)
	} else if err := checkClusterName(lb.Name); err != nil {
		errs = append(errs, fmt.Errorf("lbSpec.name: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return LoadBalancer{}, err
	}
	return lb, nil
}

// Info returns the lbInfo map of a LoadBalancer: its lbSpec plus the cluster name, enough to
// recreate it from any later call.
func (lb *LoadBalancer) Info() map[string]string {
	info := map[string]string{SpecName: lb.Name, SpecHost: lb.Host, SpecPath: lb.Path}
	if lb.Cookie != nil {
		info[SpecCookie] = lb.Cookie.Key + ":" + lb.Cookie.Value
	}
	if lb.Header != nil {
		info[SpecHeader] = lb.Header.Key + ":" + lb.Header.Value
	}
	return info
}

// checkPath accepts an exact path ("/a/b") or an element prefix ("/a/b/*", "/*").
func checkPath(p string) error {
	if err := bfeconf.CheckPathPattern(p); err != nil {
		return err
	}
	if strings.HasSuffix(p, "*") && !strings.HasSuffix(p, "/*") {
		return fmt.Errorf("path %q: a prefix must end in \"/*\"", p)
	}
	if strings.ContainsAny(p, "\"\\ \t\r\n") {
		return fmt.Errorf("path %q: quotes, backslashes and spaces are not allowed", p)
	}
	return nil
}

// parseMatch reads ingress-bfe's "key:value" condition format.
func parseMatch(s string) (*Match, error) {
	k, v, ok := strings.Cut(s, ":")
	k, v = strings.TrimSpace(k), strings.TrimSpace(v)
	if !ok || k == "" || v == "" {
		return nil, fmt.Errorf("%q: want \"key:value\"", s)
	}
	for i := 0; i < len(k); i++ {
		if !isTokenChar(k[i]) {
			return nil, fmt.Errorf("key %q: invalid character %q", k, k[i])
		}
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return nil, fmt.Errorf("value %q: only printable ASCII without quotes, backslashes and spaces", v)
		}
	}
	return &Match{Key: k, Value: v}, nil
}

// isTokenChar reports whether c may appear in an HTTP token (RFC 9110), i.e. a header or cookie name.
func isTokenChar(c byte) bool {
	return c > 0x20 && c < 0x7f && !strings.ContainsRune("\"(),/:;<=>?@[\\]{}", rune(c))
}

func checkClusterName(n string) error {
	if len(n) > 128 {
		return fmt.Errorf("%q: longer than 128 characters", n)
	}
	if n == bfeconf.AdvancedMode || n == bfeconf.Blackhole {
		return fmt.Errorf("%q is reserved by BFE", n)
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c == '-' || c == '_' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
			return fmt.Errorf("%q: only letters, digits, '-', '_' and '.' are allowed", n)
		}
	}
	return nil
}

// derivedName names a cluster after its host plus a hash of the whole route, so the same lbSpec
// always yields the same cluster and different routes never collide.
func derivedName(lb *LoadBalancer) string {
	sum := sha256.Sum256([]byte(lb.routeKey()))
	host := strings.ReplaceAll(lb.Host, "*", "wildcard")
	if len(host) > 80 {
		host = host[:80]
	}
	return "lb_" + host + "_" + hex.EncodeToString(sum[:5])
}

// ParseBackend reads a backend from its address ("ip:port") and parameters.
func ParseBackend(addr string, params map[string]string) (Backend, error) {
	var errs []error
	b := Backend{Cluster: DefaultSubCluster, Weight: DefaultWeight}
	ap, err := netip.ParseAddrPort(strings.TrimSpace(addr))
	if err != nil || ap.Port() == 0 {
		errs = append(errs, fmt.Errorf("backendAddr %q: want ip:port", addr))
	}
	b.Addr = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if c, ok := params[ParamCluster]; ok && c != "" {
		if err := checkClusterName(c); err != nil {
			errs = append(errs, fmt.Errorf("parameter %s: %w", ParamCluster, err))
		}
		b.Cluster = c
	}
	if v, ok := params[ParamWeight]; ok {
		if b.Weight, err = parseWeight(v); err != nil {
			errs = append(errs, fmt.Errorf("parameter %s: %w", ParamWeight, err))
		}
	}
	if v, ok := params[ParamClusterWeight]; ok {
		w, err := parseWeight(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("parameter %s: %w", ParamClusterWeight, err))
		}
		b.ClusterWeight = &w
	}
	if s, ok := params[ParamSubset]; ok && s != "" {
		if err := checkClusterName(s); err != nil {
			errs = append(errs, fmt.Errorf("parameter %s: %w", ParamSubset, err))
		}
		b.Subset = s
	}
	if v, ok := params[ParamSubsetWeight]; ok {
		w, err := parseWeight(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("parameter %s: %w", ParamSubsetWeight, err))
		}
		b.SubsetWeight = &w
	}
	if err := errors.Join(errs...); err != nil {
		return Backend{}, err
	}
	return b, nil
}

// ValidateParameters checks backend parameters without an address (validateBackend).
func ValidateParameters(params map[string]string) error {
	_, err := ParseBackend("127.0.0.1:1", params)
	return err
}

func parseWeight(s string) (int, error) {
	w, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || w < 0 || w > MaxWeight {
		return 0, fmt.Errorf("%q: want an integer 0..%d", s, MaxWeight)
	}
	return w, nil
}
