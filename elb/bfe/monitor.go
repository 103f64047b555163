package bfe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/lbfed/lbfed/elb/bfe/bfeconf"
)

// reloadSuccess is BFE's only success body. BFE answers HTTP 200 whatever happened, and a failure
// body embeds the error unescaped, so it is often not even valid JSON.
const reloadSuccess = `{"error":null}`

// ReloadError is a reload BFE refused (or a monitor answer that could not be read); Body is BFE's raw
// answer, kept for users.
type ReloadError struct {
	Group bfeconf.Group
	Dir   string
	Body  string
}

func (e *ReloadError) Error() string {
	return fmt.Sprintf("bfe reload %s from %s failed: %s", e.Group, e.Dir, e.Body)
}

// Monitor talks to BFE's monitor port. BFE accepts reloads only from 127.0.0.1 or ::1, so the driver
// runs on the BFE host.
type Monitor struct {
	// BaseURL is e.g. http://127.0.0.1:8421.
	BaseURL string
	// HTTP is the client to use; nil means a client with a 10s timeout.
	HTTP *http.Client
}

func (m *Monitor) client() *http.Client {
	if m.HTTP != nil {
		return m.HTTP
	}
	return defaultMonitorClient
}

var defaultMonitorClient = &http.Client{Timeout: 10 * time.Second}

// Reload asks BFE to load group g from dir (?path=). Success is exactly {"error":null}.
func (m *Monitor) Reload(ctx context.Context, g bfeconf.Group, dir string) error {
	u := strings.TrimSuffix(m.BaseURL, "/") + "/reload/" + string(g) + "?path=" + url.QueryEscape(dir)
	body, err := m.get(ctx, u)
	if err != nil {
		return fmt.Errorf("bfe reload %s from %s: %w", g, dir, err)
	}
	if string(bytes.TrimSpace(body)) != reloadSuccess {
		return &ReloadError{Group: g, Dir: dir, Body: strings.ToValidUTF8(strings.ReplaceAll(string(body), "\x00", `\x00`), "?")}
	}
	return nil
}

// ActiveVersions are the version strings BFE reports for the data it is serving.
type ActiveVersions struct {
	HostRule, VipRule, RouteRule, ClusterConf string
	ClusterTable, GslbTs, GslbSource          string
}

// Versions reads what BFE is serving from /monitor/{host_table,cluster_table,bal_table}_version.
func (m *Monitor) Versions(ctx context.Context) (ActiveVersions, error) {
	var out ActiveVersions
	var host struct{ HostTag, Vip, ProductRoute string }
	var cluster struct{ ClusterConfVer string }
	var bal struct{ ClusterTableConfVer, GslbConfTimeStamp, GslbConfSrc string }
	for _, q := range []struct {
		path string
		v    any
	}{
		{"/monitor/host_table_version", &host},
		{"/monitor/cluster_table_version", &cluster},
		{"/monitor/bal_table_version", &bal},
	} {
		body, err := m.get(ctx, strings.TrimSuffix(m.BaseURL, "/")+q.path)
		if err != nil {
			return out, fmt.Errorf("bfe %s: %w", q.path, err)
		}
		if err := json.Unmarshal(body, q.v); err != nil {
			return out, fmt.Errorf("bfe %s: decode %q: %w", q.path, body, err)
		}
	}
	out = ActiveVersions{HostRule: host.HostTag, VipRule: host.Vip, RouteRule: host.ProductRoute,
		ClusterConf: cluster.ClusterConfVer, ClusterTable: bal.ClusterTableConfVer, GslbTs: bal.GslbConfTimeStamp,
		GslbSource: bal.GslbConfSrc}
	return out, nil
}

// Check verifies that BFE serves version want of group g.
func (a ActiveVersions) Check(g bfeconf.Group, want string) error {
	var got map[string]string
	if g == bfeconf.ServerData {
		got = map[string]string{"host_rule": a.HostRule, "vip_rule": a.VipRule, "route_rule": a.RouteRule, "cluster_conf": a.ClusterConf}
	} else {
		got = map[string]string{"cluster_table": a.ClusterTable, "gslb": a.GslbTs}
	}
	var bad []string
	for _, name := range sortedMemberNames(got) {
		if got[name] != want {
			bad = append(bad, fmt.Sprintf("%s=%q", name, got[name]))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("bfe serves %s instead of version %q after reloading %s", strings.Join(bad, ", "), want, g)
	}
	return nil
}

func (m *Monitor) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := m.client().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("http status %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	return body, nil
}
