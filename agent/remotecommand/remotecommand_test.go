package remotecommand

import (
	"bytes"
	"errors"
	"io"
	"net/url"
	"slices"
	"sync"
	"testing"
)

func TestFrames(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	out := &FrameWriter{Mu: &mu, W: &buf, Stream: StreamStdout}
	if _, err := out.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFrame(&buf, StreamExit, ExitPayload(-1)); err != nil {
		t.Fatal(err)
	}
	s, p, err := ReadFrame(&buf)
	if err != nil || s != StreamStdout || string(p) != "hello" {
		t.Fatalf("frame 1: %d %q %v", s, p, err)
	}
	s, p, err = ReadFrame(&buf)
	if err != nil || s != StreamExit || !bytes.Equal(p, []byte{0xff, 0xff, 0xff, 0xff}) {
		t.Fatalf("frame 2: %d %x %v", s, p, err)
	}
	if _, _, err := ReadFrame(&buf); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func TestReadFrameErrors(t *testing.T) {
	cases := map[string][]byte{
		"truncated header":  {1, 0, 0},
		"truncated payload": {1, 0, 0, 0, 5, 'a'},
		"too large":         {1, 0xff, 0xff, 0xff, 0xff},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			if _, _, err := ReadFrame(bytes.NewReader(in)); !errors.Is(err, ErrProtocol) {
				t.Errorf("error %v, want ErrProtocol", err)
			}
		})
	}
}

func TestStreamClientSide(t *testing.T) {
	var agent bytes.Buffer
	_ = WriteFrame(&agent, StreamStdout, []byte("out"))
	_ = WriteFrame(&agent, StreamStderr, []byte("err"))
	_ = WriteFrame(&agent, StreamExit, ExitPayload(7))
	var stdout, stderr bytes.Buffer
	code, err := Stream(t.Context(), nopConn{&agent}, nil, &stdout, &stderr)
	if err != nil || code != 7 || stdout.String() != "out" || stderr.String() != "err" {
		t.Errorf("Stream: code %d, %v, stdout %q, stderr %q", code, err, stdout.String(), stderr.String())
	}

	var failing bytes.Buffer
	_ = WriteFrame(&failing, StreamError, []byte("container is not running"))
	if _, err := Stream(t.Context(), nopConn{&failing}, nil, nil, nil); err == nil || err.Error() != "exec: container is not running" {
		t.Errorf("error frame: %v", err)
	}
}

func TestQueryRoundTrip(t *testing.T) {
	o := Options{Command: []string{"sh", "-c", "echo a b"}, Container: "web", Stdin: true, TTY: true}
	q, _ := url.ParseQuery(o.Query().Encode())
	got, err := ParseQuery(q)
	if err != nil || !slices.Equal(got.Command, o.Command) || got.Container != "web" || !got.Stdin || !got.TTY {
		t.Errorf("ParseQuery(Query()) = %+v, %v", got, err)
	}
	if _, err := ParseQuery(url.Values{}); err == nil {
		t.Error("no command: want an error")
	}
	if _, err := ParseQuery(url.Values{"command": {"ls"}, "tty": {"maybe"}}); err == nil {
		t.Error("tty=maybe: want an error")
	}
}

type nopConn struct{ io.Reader }

func (nopConn) Write(p []byte) (int, error) { return len(p), nil }
func (nopConn) Close() error                { return nil }
