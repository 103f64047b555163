package alteon

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// deviceAnswer is a transport standing for a unit that answers every request alike.
type deviceAnswer struct {
	code int
	body string
}

func (a deviceAnswer) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: a.code, Status: http.StatusText(a.code), Body: io.NopCloser(strings.NewReader(a.body)), Header: http.Header{}}, nil
}

func answeringClient(t testing.TB, code int, body string, pageSize int) *Client {
	c, err := NewClient(Config{URL: "https://device.invalid", User: "admin", Password: "x", Attempts: 1, PageSize: pageSize,
		HTTPClient: &http.Client{Transport: deviceAnswer{code, body}}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A unit (or a proxy before it) that ignores offset answers the same full page for ever: List
// must stop instead of looping and growing without bound.
func TestListStopsOnARepeatedPage(t *testing.T) {
	c := answeringClient(t, 200, `{"SlbNewCfgEnhRealServerTable":[{"Index":"a"},{"Index":"b"}]}`, 2)
	done := make(chan error, 1)
	go func() {
		_, err := c.List(context.Background(), TableRealServer)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a page repeated for ever is an error, not a table")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("List did not stop")
	}
}

// FuzzDeviceAnswers: a unit's answers are untrusted input. Whatever it answers, the client's
// reads end (no endless paging), fail with an error or return rows that came in a 2xx answer,
// and never panic on the device's loose typing.
func FuzzDeviceAnswers(f *testing.F) {
	f.Add(200, `{"SlbNewCfgEnhRealServerTable":[{"Index":"1","IpAddr":"10.0.0.1","Weight":"3"}]}`)
	f.Add(200, `{"slbnewcfgenhrealservertable":[{"Index":1},"row"]}`)
	f.Add(200, `{"status":"err","message":"Apply in progress"}`)
	f.Add(406, `not json`)
	f.Add(200, "{\"agSysName\":\"a\u0085b\n\",\"haSwitchInfoState\":\"master\"}")
	f.Add(200, `{"SlbNewCfgEnhRealServerTable":[{},{}]}`)
	f.Add(200, ``)
	f.Fuzz(func(t *testing.T, code int, body string) {
		if code < 100 || code > 999 {
			return // not an HTTP status net/http would deliver
		}
		c := answeringClient(t, code, body, 2)
		ctx := context.Background()
		done := make(chan struct{})
		go func() {
			defer close(done)
			rows, err := c.List(ctx, TableRealServer)
			if err == nil && code/100 != 2 {
				t.Errorf("rows from HTTP %d", code)
			}
			for _, r := range rows {
				_, _ = r.Str("IpAddr"), r.Int("Weight")
			}
			if _, _, err := c.Get(ctx, TableRealServer, "1"); err == nil && code/100 != 2 {
				t.Errorf("a row from HTTP %d", code)
			}
			_, _ = c.Role(ctx)
			_, _ = c.Scalars(ctx, "agSysName")
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("reads did not end for HTTP %d %q", code, body)
		}
	})
}
