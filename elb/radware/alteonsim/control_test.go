package alteonsim

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestControlHandler(t *testing.T) {
	g := NewWithT(t)
	p, a, _ := startPair(t, Options{}, Options{})
	srv := httptest.NewServer(ControlHandler(p))
	defer srv.Close()
	call := func(method, path, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	st, m := call("GET", "/roles", "")
	g.Expect(st).To(Equal(200))
	g.Expect(m).To(Equal(map[string]any{"alteon-a": "master", "alteon-b": "backup"}))
	_, m = call("POST", "/failover", "")
	g.Expect(m).To(Equal(map[string]any{"alteon-a": "backup", "alteon-b": "master"}))
	_, m = call("PUT", "/roles?a=master&b=master", "")
	g.Expect(m).To(Equal(map[string]any{"alteon-a": "master", "alteon-b": "master"}))
	st, _ = call("PUT", "/roles?a=boss&b=master", "")
	g.Expect(st).To(Equal(400))

	// A fault installed over the control API hits the unit's REST API.
	st, m = call("POST", "/faults?device=a", `{"kind":"status","status":503,"path":"/config/SlbNewCfgEnhGroupTable","times":1}`)
	g.Expect(st).To(Equal(200))
	g.Expect(m).To(HaveKey("id"))
	code, _ := a.do("GET", "/SlbNewCfgEnhGroupTable", "")
	g.Expect(code).To(Equal(503))
	code, _ = a.do("GET", "/SlbNewCfgEnhGroupTable", "")
	g.Expect(code).To(Equal(200))
	st, _ = call("POST", "/faults?device=a", `{"kind":"explode"}`)
	g.Expect(st).To(Equal(400))
	st, _ = call("POST", "/faults?device=z", `{"kind":"reset"}`)
	g.Expect(st).To(Equal(404))

	_, _ = call("POST", "/apply-fault?device=alteon-a", `{"fail":"Injected."}`)
	a.ok("POST", "/SlbNewCfgEnhGroupTable/g", `{}`)
	g.Expect(a.apply()).To(Equal("5"))
	_, _ = call("POST", "/apply-fault?device=a", `{"hang":true}`)
	a.ok("POST", "?action=apply", "")
	g.Expect(a.scalar("agApplyConfig")).To(Equal("3"))
	_, _ = call("POST", "/release-apply?device=a", "")
	g.Expect(a.waitState("agApplyConfig")).To(Equal("4"))

	// A save fails once; a reboot then loses the unsaved change.
	st, _ = call("POST", "/save-fault?device=a", `{"fail":"Flash write error."}`)
	g.Expect(st).To(Equal(200))
	a.ok("POST", "?action=save", "")
	g.Expect(a.waitState("agSaveConfig")).To(Equal("5"))
	g.Expect(a.scalar("agSavePending")).To(Equal("1"))
	st, _ = call("POST", "/reboot?device=a", "")
	g.Expect(st).To(Equal(200))
	g.Expect(p.A.Snapshot(Running).Groups()).To(BeEmpty(), "the unsaved group is gone")
	g.Expect(a.scalar("agSavePending")).To(Equal("2"))

	_, m = call("GET", "/stats", "")
	g.Expect(m).To(HaveKey("alteon-a"))
	g.Expect(m["alteon-a"].(map[string]any)["applies"]).To(BeEquivalentTo(2))
	_, _ = call("DELETE", "/faults?device=a", "")
}
