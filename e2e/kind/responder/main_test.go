package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestClusterName(t *testing.T) {
	tests := []struct{ cluster, node, want string }{
		{"m9", "lbfed-m1-control-plane", "m9"},
		{"", "lbfed-m1-control-plane", "m1"},
		{"", "lbfed-karmada-host-control-plane", "karmada-host"},
		{"", "lbfed-m2-worker2", "m2"},
		{"", "other-worker", "other"},
		{"", "node-a", "node-a"},
	}
	for _, tc := range tests {
		if got := clusterName(tc.cluster, tc.node); got != tc.want {
			t.Errorf("clusterName(%q, %q) = %q, want %q", tc.cluster, tc.node, got, tc.want)
		}
	}
}

func TestAnswer(t *testing.T) {
	srv := httptest.NewServer(handler("m1", "demo", "web-1"))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	if a.Cluster != "m1" || a.Namespace != "demo" || a.Pod != "web-1" || a.Path != "/x" || a.IP != "127.0.0.1" || a.Port == 0 {
		t.Fatalf("answer %+v", a)
	}
}

func TestGet(t *testing.T) {
	srv := httptest.NewServer(handler("m2", "demo", "web-2"))
	defer srv.Close()
	var out bytes.Buffer
	if err := get(&out, []string{srv.URL + "/a", srv.URL + "/b"}, time.Second); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 2 || !strings.Contains(lines[1], `"cluster":"m2"`) {
		t.Fatalf("output %q", out.String())
	}
	missing := httptest.NewServer(http.NotFoundHandler())
	defer missing.Close()
	if err := get(&out, []string{missing.URL}, time.Second); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("want a 404 error, got %v", err)
	}
}
