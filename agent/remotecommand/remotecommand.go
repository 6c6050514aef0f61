// Package remotecommand is the wire protocol of `skiff exec`: how a
// command's stdin, stdout, stderr and exit code travel between the CLI and
// the node agent, through the API server.
//
// # The connection
//
// The client sends
//
//	POST /api/v1/namespaces/NS/pods/NAME/exec?command=sh&command=-c&command=...&container=C&stdin=true&tty=true
//	Connection: Upgrade
//	Upgrade: skiff-exec
//	Authorization: Bearer TOKEN
//
// to the API server, which checks the token and the pod and forwards the
// request to the agent of the pod's node (POST /pods/NS/NAME/exec, same
// query). When the agent can run the command it answers
// "101 Switching Protocols" and from then on the TCP connection, through
// the API server, carries frames in both directions. Any other answer is an
// ordinary HTTP error with a Kubernetes Status body (pod not found,
// container not running, ...). Kubernetes does the same with SPDY or
// WebSocket sub-protocols; skiff's framing is small enough to read in one
// sitting.
//
// # Frames
//
// Each frame is one byte of stream id, a four-byte big-endian payload
// length, and the payload:
//
//	+--------+--------+--------+--------+--------+=============+
//	| stream |        length (uint32, big-endian)  |  payload    |
//	+--------+--------+--------+--------+--------+=============+
//
// Streams:
//
//	0 stdin   client → agent; an empty payload closes the command's stdin
//	1 stdout  agent → client
//	2 stderr  agent → client (with a TTY everything comes on stdout)
//	3 exit    agent → client, last frame: the exit code, 4 bytes big-endian
//	4 error   agent → client, last frame: the command could not run (text)
//
// The agent closes the connection after the exit (or error) frame; the
// client closing the connection kills nothing by itself, but ends the
// exec's context, so the agent stops waiting for output.
package remotecommand

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"skiff.dev/skiff/api"
)

// Protocol is the Upgrade header value of an exec connection.
const Protocol = "skiff-exec"

// Stream ids.
const (
	StreamStdin  byte = 0
	StreamStdout byte = 1
	StreamStderr byte = 2
	StreamExit   byte = 3
	StreamError  byte = 4
)

// MaxFrame bounds a frame's payload; a larger length is a protocol error.
const MaxFrame = 1 << 20

// ErrProtocol is a malformed frame.
var ErrProtocol = errors.New("exec stream: protocol error")

// WriteFrame writes one frame.
func WriteFrame(w io.Writer, stream byte, payload []byte) error {
	if len(payload) > MaxFrame {
		return fmt.Errorf("%w: frame of %d bytes", ErrProtocol, len(payload))
	}
	var hdr [5]byte
	hdr[0] = stream
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	if _, err := w.Write(append(hdr[:], payload...)); err != nil {
		return err
	}
	return nil
}

// ReadFrame reads one frame. io.EOF means the peer closed between frames.
func ReadFrame(r io.Reader) (stream byte, payload []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, fmt.Errorf("%w: truncated header", ErrProtocol)
		}
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxFrame {
		return 0, nil, fmt.Errorf("%w: frame of %d bytes", ErrProtocol, n)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, fmt.Errorf("%w: truncated payload: %v", ErrProtocol, err)
	}
	return hdr[0], payload, nil
}

// FrameWriter is an io.Writer that sends what is written as frames of one
// stream. Several FrameWriters may share one connection: Mu serialises them.
type FrameWriter struct {
	Mu     *sync.Mutex
	W      io.Writer
	Stream byte
}

func (f *FrameWriter) Write(p []byte) (int, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), MaxFrame)]
		if err := WriteFrame(f.W, f.Stream, chunk); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

// Options of an exec request.
type Options struct {
	Command   []string
	Container string
	Stdin     bool
	TTY       bool
}

// Query encodes o as the exec request's query string.
func (o Options) Query() url.Values {
	q := url.Values{}
	for _, c := range o.Command {
		q.Add("command", c)
	}
	if o.Container != "" {
		q.Set("container", o.Container)
	}
	if o.Stdin {
		q.Set("stdin", "true")
	}
	if o.TTY {
		q.Set("tty", "true")
	}
	return q
}

// ParseQuery decodes an exec request's query string.
func ParseQuery(q url.Values) (Options, error) {
	o := Options{Command: q["command"], Container: q.Get("container")}
	var err error
	if o.Stdin, err = boolParam(q, "stdin"); err != nil {
		return o, err
	}
	if o.TTY, err = boolParam(q, "tty"); err != nil {
		return o, err
	}
	if len(o.Command) == 0 {
		return o, errors.New("you must specify at least one command for the container")
	}
	return o, nil
}

func boolParam(q url.Values, name string) (bool, error) {
	switch strings.ToLower(q.Get(name)) {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	}
	return false, fmt.Errorf("%s=%q: want true or false", name, q.Get(name))
}

// Dial opens an exec connection: it POSTs to server+path with the options
// in the query and the upgrade headers, and returns the upgraded
// connection. An answer other than 101 is returned as *api.StatusError.
func Dial(ctx context.Context, hc *http.Client, server, token, path string, o Options) (io.ReadWriteCloser, error) {
	return DialUpgrade(ctx, hc, server, token, path, o.Query(), Protocol, "exec")
}

// DialUpgrade POSTs to server+path?query asking to upgrade the connection
// to protocol, with the bearer token, and returns the upgraded connection.
// An answer other than 101 is returned as *api.StatusError. what names the
// operation in errors ("exec", "port-forward"). Port-forward uses it too.
func DialUpgrade(ctx context.Context, hc *http.Client, server, token, path string, query url.Values, protocol, what string) (io.ReadWriteCloser, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	u := strings.TrimRight(server, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	if !strings.Contains(server, "://") {
		u = "http://" + u
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", protocol)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return nil, StatusFromResponse(resp)
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, fmt.Errorf("%s: the server switched protocols but the connection is not writable", what)
	}
	return rwc, nil
}

// StatusFromResponse turns a failed response into *api.StatusError: its
// Status body when it has one, else its text.
func StatusFromResponse(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var st api.Status
	if json.Unmarshal(data, &st) == nil && st.Kind == "Status" && st.Message != "" {
		if st.Code == 0 {
			st.Code = int32(resp.StatusCode)
		}
		return &api.StatusError{Status: st}
	}
	msg := strings.TrimSpace(string(data))
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return api.NewStatusError(resp.StatusCode, "", msg)
}

// Stream runs the client side of an exec connection: it sends stdin (when
// not nil) as frames, copies stdout and stderr frames to their writers, and
// returns the exit code. It closes conn before returning.
func Stream(ctx context.Context, conn io.ReadWriteCloser, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	if stdin != nil {
		var mu sync.Mutex
		go func() {
			// Ends when stdin does, or when conn is closed under it.
			_, err := io.Copy(&FrameWriter{Mu: &mu, W: conn, Stream: StreamStdin}, stdin)
			if err == nil {
				mu.Lock()
				_ = WriteFrame(conn, StreamStdin, nil)
				mu.Unlock()
			}
		}()
	}
	br := bufio.NewReader(conn)
	for {
		stream, payload, err := ReadFrame(br)
		if err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				return 0, errors.New("exec: the connection closed before the command's exit code came")
			}
			return 0, fmt.Errorf("exec: %w", err)
		}
		switch stream {
		case StreamStdout:
			if _, err := stdout.Write(payload); err != nil {
				return 0, err
			}
		case StreamStderr:
			if _, err := stderr.Write(payload); err != nil {
				return 0, err
			}
		case StreamExit:
			if len(payload) != 4 {
				return 0, fmt.Errorf("%w: exit frame of %d bytes", ErrProtocol, len(payload))
			}
			return int(int32(binary.BigEndian.Uint32(payload))), nil
		case StreamError:
			return 0, fmt.Errorf("exec: %s", payload)
		default:
			return 0, fmt.Errorf("%w: unknown stream %d", ErrProtocol, stream)
		}
	}
}

// ExitPayload encodes an exit code for an exit frame.
func ExitPayload(code int) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(int32(code)))
}
