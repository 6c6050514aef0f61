package apiserver

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kscheme "k8s.io/client-go/kubernetes/scheme"

	"skiff.dev/skiff/api"
)

// # Protobuf request bodies
//
// kubectl sends `create deployment|namespace|configmap|secret|job` and
// drain's DeleteOptions and Eviction in Kubernetes' protobuf encoding
// (Content-Type application/vnd.kubernetes.protobuf): the magic
// "k8s\x00" and a runtime.Unknown envelope naming apiVersion and kind
// around the object's own protobuf bytes. skiff has one decoder, the strict
// JSON one, so a protobuf body is read into the k8s.io/api type of its kind
// (k8s.io/apimachinery's protobuf serializer), written out as that type's
// JSON (the same field names skiff's types carry) and handed to the JSON
// path: a field skiff does not support, when set, is refused there with
// its path, exactly as in a JSON body. Responses are always JSON, which
// client-go accepts whatever it sent.

// contentTypeProtobuf is Kubernetes' protobuf media type.
const contentTypeProtobuf = runtime.ContentTypeProtobuf

// k8sScheme is the scheme of the k8s.io/api types (client-go's), built
// once and only read afterwards: the protobuf decoder and server-side
// apply's type converter use it.
var k8sScheme = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(s))
	return s
})

// mediaType is the media type of a Content-Type or Accept entry, without
// parameters, lower case ("" when it does not parse).
func mediaType(v string) string {
	v = strings.TrimSpace(v)
	if plainMediaType(v) {
		return v // what ParseMediaType returns, without its map of parameters
	}
	mt, _, err := mime.ParseMediaType(v)
	if err != nil {
		return ""
	}
	return mt
}

// plainMediaType reports whether v is type/subtype alone, in lower case,
// of the characters RFC 6838 allows in a name: "application/json", as
// nearly every request's Content-Type and Accept entry is.
func plainMediaType(v string) bool {
	typ, sub, ok := strings.Cut(v, "/")
	if !ok || typ == "" || sub == "" {
		return false
	}
	for i := range len(v) {
		switch c := v[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '/' && i == len(typ):
		case strings.IndexByte("!#$&-^_.+", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// isProtobuf reports whether a request body is Kubernetes protobuf.
func isProtobuf(r *http.Request) bool {
	return mediaType(r.Header.Get("Content-Type")) == contentTypeProtobuf
}

// unsupportedMediaType is kube-apiserver's 415 for a body it cannot read,
// with what skiff reads.
func unsupportedMediaType(why string) *api.StatusError {
	msg := "the body of the request was in an unknown format - accepted media types include: application/json, " + contentTypeProtobuf
	if why != "" {
		msg += " (" + why + ")"
	}
	return api.NewStatusError(http.StatusUnsupportedMediaType, "UnsupportedMediaType", msg)
}

// protobufToJSON decodes a protobuf request body into the k8s.io/api type
// its envelope names and returns that object as JSON, apiVersion and kind
// included. A kind Kubernetes' scheme does not know (skiff's own kinds) is
// 415; a body that is not a protobuf message is 400.
func protobufToJSON(body []byte) ([]byte, error) {
	s := k8sScheme()
	obj, gvk, err := protobuf.NewSerializer(s, s).Decode(body, nil, nil)
	if runtime.IsNotRegisteredError(err) {
		kind := "it"
		if gvk != nil {
			kind = gvk.Kind + " " + gvk.GroupVersion().String()
		}
		return nil, unsupportedMediaType(fmt.Sprintf("skiff reads protobuf for Kubernetes kinds only; send %s as JSON", kind))
	}
	if err != nil {
		return nil, api.NewBadRequest("decode protobuf body: " + err.Error())
	}
	obj.GetObjectKind().SetGroupVersionKind(*gvk)
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, api.NewInternal(fmt.Errorf("encode %s as JSON: %w", gvk.Kind, err))
	}
	// Empty non-pointer structs ("resources": {}, "strategy": {},
	// "status": {}) come out as {} and skiff's decoder takes them: they set
	// nothing. Timestamps left zero are omitted (omitzero).
	return b, nil
}

// acceptsJSON reports whether a request's Accept header lets skiff answer in
// JSON: no header, or any entry JSON satisfies. A client asking only for
// protobuf gets 406, as kube-apiserver answers a media type it cannot
// produce (client-go always adds application/json after protobuf).
func acceptsJSON(r *http.Request) bool {
	accept := r.Header.Get("Accept")
	if strings.TrimSpace(accept) == "" {
		return true
	}
	for part := range strings.SplitSeq(accept, ",") {
		if mt := mediaType(part); mt != contentTypeProtobuf {
			return true // JSON, */*, a Table request (table.go) or anything else decided elsewhere
		}
	}
	return false
}

// notAcceptable is kube-apiserver's 406.
func notAcceptable() *api.StatusError {
	return api.NewStatusError(http.StatusNotAcceptable, "NotAcceptable",
		"only the following media types are accepted: application/json (skiff answers in JSON; client-go reads it whatever it asked for)")
}
