package remotecommand

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/url"
	"reflect"
	"testing"
	"time"
)

// frames encodes (stream, payload) pairs.
func frames(pairs ...any) []byte {
	var b bytes.Buffer
	for i := 0; i+1 < len(pairs); i += 2 {
		_ = WriteFrame(&b, pairs[i].(byte), []byte(pairs[i+1].(string)))
	}
	return b.Bytes()
}

// FuzzReadFrame reads frames from any bytes: each frame read writes back
// as exactly the bytes it came from; reading ends with io.EOF exactly at a
// frame boundary at the end of the input, else with ErrProtocol.
func FuzzReadFrame(f *testing.F) {
	f.Add(frames(StreamStdout, "hello", StreamExit, string(ExitPayload(-1))))
	f.Add(frames(StreamStdin, "ls\n", StreamStdin, ""))
	f.Add([]byte{1, 0, 0})
	f.Add([]byte{1, 0, 0, 0, 5, 'a'})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{1, 0, 0x10, 0, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			t.Skip("input too large")
		}
		r := bytes.NewReader(data)
		consumed := 0
		for {
			stream, payload, err := ReadFrame(r)
			if errors.Is(err, io.EOF) {
				if consumed != len(data) {
					t.Fatalf("io.EOF after %d of %d bytes", consumed, len(data))
				}
				return
			}
			if err != nil {
				if !errors.Is(err, ErrProtocol) {
					t.Fatalf("error is not ErrProtocol: %v", err)
				}
				return
			}
			var again bytes.Buffer
			if err := WriteFrame(&again, stream, payload); err != nil {
				t.Fatalf("a frame read does not write: %v", err)
			}
			if n := again.Len(); consumed+n > len(data) || !bytes.Equal(again.Bytes(), data[consumed:consumed+n]) {
				t.Fatalf("frame at %d does not write back as its bytes", consumed)
			}
			consumed += again.Len()
		}
	})
}

// FuzzStream runs the client side of exec on whatever an agent sends: it
// ends (the input does), copies exactly the stdout and stderr frames before
// the first exit or error frame, and returns the exit frame's code; any
// other end is an error.
func FuzzStream(f *testing.F) {
	f.Add(frames(StreamStdout, "out", StreamStderr, "err", StreamExit, string(ExitPayload(7))))
	f.Add(frames(StreamError, "container is not running"))
	f.Add(frames(StreamStdout, "a", StreamExit, "abc"))
	f.Add(frames(StreamStdout, "a", byte(9), "?"))
	f.Add(frames(StreamStdout, "partial"))
	f.Add(frames(StreamStdin, "echo", StreamExit, string(ExitPayload(0)), StreamStdout, "after"))
	f.Add([]byte{1, 0, 0, 0, 9, 'x'})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			t.Skip("input too large")
		}
		// What the stream says, read frame by frame.
		var wantOut, wantErr bytes.Buffer
		wantCode, wantOK := 0, false
		r := bytes.NewReader(data)
	read:
		for {
			stream, payload, err := ReadFrame(r)
			if err != nil {
				break
			}
			switch stream {
			case StreamStdout:
				wantOut.Write(payload)
			case StreamStderr:
				wantErr.Write(payload)
			case StreamExit:
				if len(payload) == 4 {
					wantCode, wantOK = int(int32(binary.BigEndian.Uint32(payload))), true
				}
				break read
			default:
				break read
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var stdout, stderr bytes.Buffer
		code, err := Stream(ctx, nopConn{bytes.NewReader(data)}, nil, &stdout, &stderr)
		if ctx.Err() != nil {
			t.Fatal("Stream did not end with its input")
		}
		if (err == nil) != wantOK || code != wantCode {
			t.Fatalf("Stream: code %d, %v; want code %d, ok %v", code, err, wantCode, wantOK)
		}
		if stdout.String() != wantOut.String() || stderr.String() != wantErr.String() {
			t.Fatalf("Stream copied stdout %q stderr %q, want %q %q", stdout.String(), stderr.String(), wantOut.String(), wantErr.String())
		}
	})
}

// FuzzParseQuery: an exec query that parses encodes (Options.Query) to one
// that parses to the same options, with a command.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{
		"command=sh&command=-c&command=echo+a+b&container=web&stdin=true&tty=true",
		"command=ls&stdin=1&tty=0", "command=ls&stdin=yes", "container=web", "command=&tty=TRUE", "command=%zz", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if len(raw) > 4<<10 {
			t.Skip("input too large")
		}
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		o, err := ParseQuery(q)
		if err != nil {
			return
		}
		if len(o.Command) == 0 {
			t.Fatalf("%q: options without a command", raw)
		}
		again, err := ParseQuery(o.Query())
		if err != nil || !reflect.DeepEqual(o, again) {
			t.Fatalf("%q: %+v encodes to %q, which parses to %+v (%v)", raw, o, o.Query().Encode(), again, err)
		}
	})
}
