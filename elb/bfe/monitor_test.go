package bfe

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/lbfed/lbfed/elb/bfe/bfeconf"
)

func TestMonitorReloadBodies(t *testing.T) {
	// Bodies are BFE's real answers (all with HTTP 200 unless stated).
	cases := []struct {
		name   string
		status int
		body   string
		ok     bool
		want   string // substring of the error message
	}{
		{"success", 200, `{"error":null}`, true, ""},
		{"success with newline", 200, "{\"error\":null}\n", true, ""},
		{"syntax error, invalid JSON", 200, `{"error":"hostTableLoad Error error build [req_host_in("x"] [1:16 syntax error]"}`, false,
			`hostTableLoad Error error build [req_host_in("x"] [1:16 syntax error]`},
		{"json-iterator error with newline and NUL", 200, "{\"error\":\"clusterTableLoad():readObjectStart: expect { or n, but found \x00, error found in #0 byte of ...||...\nbigger context ...\"}", false,
			`found \x00, error found`},
		{"partial gslb", 200, `{"error":"error in BalTableReload() for [c_ghost]"}`, false, "error in BalTableReload() for [c_ghost]"},
		{"acl", 200, `{"error":"reload is not allowed from [127.0.0.2:40686]"}`, false, "reload is not allowed from"},
		{"unknown handler", 200, `{"error":"handler not exist, type[reload], command[cluster_table_conf]"}`, false, "handler not exist"},
		{"almost success", 200, `{"error": null}`, false, `{"error": null}`},
		{"empty body", 200, ``, false, "failed: "},
		{"http error", 500, `boom`, false, "http status 500: boom"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var gotPath, gotQuery string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotPath, gotQuery = r.URL.Path, r.URL.Query().Get("path")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			m := &Monitor{BaseURL: srv.URL + "/"}
			err := m.Reload(context.Background(), bfeconf.GslbData, "/data/v 1/cluster_conf")
			g.Expect(gotPath).To(Equal("/reload/gslb_data_conf"))
			g.Expect(gotQuery).To(Equal("/data/v 1/cluster_conf"))
			if tc.ok {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			var re *ReloadError
			if tc.status == 200 {
				g.Expect(errors.As(err, &re)).To(BeTrue())
				g.Expect(re.Group).To(Equal(bfeconf.GslbData))
			}
		})
	}
}

func TestMonitorVersions(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/monitor/host_table_version":
			_, _ = w.Write([]byte(`{"HostTag":"v2","Vip":"v2","ProductRoute":"v2"}`))
		case "/monitor/cluster_table_version":
			_, _ = w.Write([]byte(`{"ClusterConfVer":"v2"}`))
		case "/monitor/bal_table_version":
			_, _ = w.Write([]byte(`{"ClusterTableConfVer":"v4","GslbConfTimeStamp":"v4","GslbConfSrc":"driver"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	v, err := (&Monitor{BaseURL: srv.URL}).Versions(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal(ActiveVersions{HostRule: "v2", VipRule: "v2", RouteRule: "v2", ClusterConf: "v2",
		ClusterTable: "v4", GslbTs: "v4", GslbSource: "driver"}))
	g.Expect(v.Check(bfeconf.ServerData, "v2")).To(Succeed())
	g.Expect(v.Check(bfeconf.GslbData, "v4")).To(Succeed())
	g.Expect(v.Check(bfeconf.GslbData, "v5")).To(MatchError(ContainSubstring(`cluster_table="v4", gslb="v4" instead of version "v5"`)))
	v.ClusterConf = "v1"
	g.Expect(v.Check(bfeconf.ServerData, "v2")).To(MatchError(ContainSubstring(`cluster_conf="v1"`)))
}
