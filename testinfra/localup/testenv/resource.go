package testenv

import (
	"net/http"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// requestInfo parses API paths as the API server does.
var requestInfo = &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}

// APIResource names the resource of an API request ("backendrecords",
// "backendrecords/status"), for tests that count a client's requests by resource; a path that
// names no resource is returned as it is.
func APIResource(req *http.Request) string {
	info, err := requestInfo.NewRequestInfo(req)
	if err != nil || !info.IsResourceRequest {
		return req.URL.Path
	}
	if info.Subresource != "" {
		return info.Resource + "/" + info.Subresource
	}
	return info.Resource
}
