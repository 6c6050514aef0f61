package apiserver

import (
	"bytes"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	openapi_v3 "github.com/google/gnostic-models/openapiv3"
	"github.com/klauspost/compress/s2"
	"github.com/munnerz/goautoneg"
	"google.golang.org/protobuf/proto"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/openapi"
)

// The OpenAPI documents (package api/openapi), served as kube-apiserver
// serves them (kube-openapi's handler and handler3):
//
//	/openapi/v2            Swagger 2.0, JSON or protobuf (what client-go's
//	                       OpenAPISchema asks for)
//	/openapi/v3            {"paths": {"api/v1": {"serverRelativeURL":
//	                       "/openapi/v3/api/v1?hash=..."}, ...}}
//	/openapi/v3/api/v1     one group version, JSON or protobuf
//
// Each is made once, when the server is made (the types do not change at
// run time). Every document has an ETag (the SHA-512 of its JSON, as
// kube-apiserver's) and answers If-None-Match with 304; a group version
// asked for with the hash the discovery document names is immutable
// (Cache-Control: public, immutable), with another hash it is a 301 to the
// current one. Any authenticated user may read them.

// The media types of the protobuf forms (gnostic's OpenAPI messages). A
// client may ask for either spelling; the answer is always named by the
// first, which mime.ParseMediaType (and so client-go) can read.
const (
	mimeOpenAPIV2Proto           = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	mimeOpenAPIV2ProtoDeprecated = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	mimeOpenAPIV3Proto           = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"
	mimeOpenAPIV3ProtoDeprecated = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"
)

// openAPIDoc is one served document: its JSON, ETag and, made on first
// request, its protobuf form. It keeps both S2-compressed (the JSON of
// every group version is 2.0 MB, 247 KB compressed, in every server for
// its whole life; compressing it costs 3.5 ms of the documents' 110 ms
// build), and each request decompresses what it sends (0.14 ms for
// api/v1).
type openAPIDoc struct {
	zjson   []byte
	etag    string
	toProto func([]byte) ([]byte, error)

	once   sync.Once
	zproto []byte
	err    error
}

func newOpenAPIDoc(b []byte, toProto func([]byte) ([]byte, error)) *openAPIDoc {
	return &openAPIDoc{zjson: compress(b), etag: etagOf(b), toProto: toProto}
}

// compress is b compressed, in a slice about its own length: S2's encoder
// writes into a buffer of the worst case's length (about b's), and a
// document kept in a sub-slice of it kept that whole buffer.
func compress(b []byte) []byte { return bytes.Clone(s2.EncodeBetter(nil, b)) }

func (d *openAPIDoc) json() ([]byte, error) { return s2.Decode(nil, d.zjson) }

func (d *openAPIDoc) protobuf() ([]byte, error) {
	d.once.Do(func() {
		var j, p []byte
		if j, d.err = d.json(); d.err != nil {
			return
		}
		if p, d.err = d.toProto(j); d.err == nil {
			d.zproto = compress(p)
		}
	})
	if d.err != nil {
		return nil, d.err
	}
	return s2.Decode(nil, d.zproto)
}

// openAPIServer holds the documents.
type openAPIServer struct {
	v2        *openAPIDoc
	v3        map[string]*openAPIDoc // by "api/v1", "apis/apps/v1"
	discovery []byte
	discETag  string
	modified  time.Time
}

func etagOf(b []byte) string { return fmt.Sprintf("%X", sha512.Sum512(b)) }

// openAPIBuilt holds the documents built for each version string: they
// depend only on api.Kinds (fixed at init) and the version, and nothing
// changes them once built, so every server of a process (the HA tests run
// three; a test package runs hundreds) shares one build instead of paying
// for it again (about 0.1 s each, 0.7 s under the race detector).
var openAPIBuilt sync.Map // version → *openAPIOnce

type openAPIOnce struct {
	once sync.Once
	o    *openAPIServer
	err  error
}

// newOpenAPIServer returns the documents of api.Kinds for version, built
// on the process's first call for that version.
func newOpenAPIServer(version string) (*openAPIServer, error) {
	v, _ := openAPIBuilt.LoadOrStore(version, &openAPIOnce{})
	b := v.(*openAPIOnce)
	b.once.Do(func() { b.o, b.err = buildOpenAPIServer(version) })
	return b.o, b.err
}

// buildOpenAPIServer builds and encodes the documents of api.Kinds.
func buildOpenAPIServer(version string) (*openAPIServer, error) {
	docs, err := openapi.Build(api.Kinds, version)
	if err != nil {
		return nil, err
	}
	o := &openAPIServer{v3: map[string]*openAPIDoc{}, modified: time.Now()}
	b, err := json.Marshal(docs.V2)
	if err != nil {
		return nil, fmt.Errorf("encode openapi v2: %w", err)
	}
	o.v2 = newOpenAPIDoc(b, func(j []byte) ([]byte, error) {
		d, err := openapi_v2.ParseDocument(j)
		if err != nil {
			return nil, err
		}
		return proto.Marshal(d)
	})
	type gvEntry struct {
		ServerRelativeURL string `json:"serverRelativeURL"`
	}
	disc := struct {
		Paths map[string]gvEntry `json:"paths"`
	}{Paths: map[string]gvEntry{}}
	gvs := make([]string, 0, len(docs.V3))
	for gv := range docs.V3 {
		gvs = append(gvs, gv)
	}
	sort.Strings(gvs)
	for _, gv := range gvs {
		b, err := json.Marshal(docs.V3[gv])
		if err != nil {
			return nil, fmt.Errorf("encode openapi v3 %s: %w", gv, err)
		}
		d := newOpenAPIDoc(b, func(j []byte) ([]byte, error) {
			d, err := openapi_v3.ParseDocument(j)
			if err != nil {
				return nil, err
			}
			return proto.Marshal(d)
		})
		o.v3[gv] = d
		disc.Paths[gv] = gvEntry{ServerRelativeURL: v3URL(gv, d.etag)}
	}
	if o.discovery, err = json.Marshal(disc); err != nil {
		return nil, fmt.Errorf("encode openapi v3 discovery: %w", err)
	}
	o.discETag = etagOf(o.discovery)
	return o, nil
}

// v3URL is kube-openapi's serverRelativeURL of a group version.
func v3URL(gv, etag string) string {
	return "/openapi/v3/" + gv + "?" + url.Values{"hash": {etag}}.Encode()
}

// serveOpenAPI answers /openapi/v2, /openapi/v3 and /openapi/v3/...; it
// reports false for any other path.
func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) bool {
	p := r.URL.Path
	if p != "/openapi/v2" && p != "/openapi/v3" && !strings.HasPrefix(p, "/openapi/v3/") {
		return false
	}
	o := s.openapi
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, api.NewStatusError(http.StatusMethodNotAllowed, api.ReasonMethodNotAllowd,
			fmt.Sprintf("method %s is not supported on %s", r.Method, p)))
		return true
	}
	switch {
	case p == "/openapi/v2":
		o.serveDoc(w, r, o.v2, mimeOpenAPIV2Proto, mimeOpenAPIV2ProtoDeprecated)
	case p == "/openapi/v3":
		w.Header().Set("Etag", strconv.Quote(o.discETag))
		w.Header().Set("Content-Type", "application/json")
		http.ServeContent(w, r, "", o.modified, bytes.NewReader(o.discovery))
	default:
		gv := strings.TrimPrefix(p, "/openapi/v3/")
		d := o.v3[gv]
		if d == nil {
			writeError(w, notFoundPath())
			return true
		}
		if hash := r.URL.Query().Get("hash"); hash != "" {
			if hash != d.etag {
				http.Redirect(w, r, v3URL(gv, d.etag), http.StatusMovedPermanently)
				return true
			}
			w.Header().Set("Cache-Control", "public, immutable")
			w.Header().Set("Expires", time.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat))
		}
		o.serveDoc(w, r, d, mimeOpenAPIV3Proto, mimeOpenAPIV3ProtoDeprecated)
	}
	return true
}

// serveDoc sends d as JSON or protobuf, whichever Accept prefers, or 406.
func (o *openAPIServer) serveDoc(w http.ResponseWriter, r *http.Request, d *openAPIDoc, protoType, protoDeprecated string) {
	w.Header().Add("Vary", "Accept")
	accept := r.Header.Get("Accept")
	if accept == "" {
		accept = "*/*"
	}
	switch goautoneg.Negotiate(accept, []string{"application/json", protoType, protoDeprecated}) {
	case "application/json":
		b, err := d.json()
		if err != nil {
			writeError(w, api.NewInternal(fmt.Errorf("decompress openapi: %w", err)))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Etag", strconv.Quote(d.etag))
		http.ServeContent(w, r, "", o.modified, bytes.NewReader(b))
	case protoType, protoDeprecated:
		b, err := d.protobuf()
		if err != nil {
			writeError(w, api.NewInternal(fmt.Errorf("encode openapi as protobuf: %w", err)))
			return
		}
		w.Header().Set("Content-Type", protoType)
		w.Header().Set("Etag", strconv.Quote(d.etag))
		http.ServeContent(w, r, "", o.modified, bytes.NewReader(b))
	default:
		writeError(w, api.NewStatusError(http.StatusNotAcceptable, api.StatusReason("NotAcceptable"),
			"only application/json and "+protoType+" are served here"))
	}
}
