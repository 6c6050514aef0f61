package api

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The fast checks give apimachinery's answers, message for message, on
// edge cases and on 200,000 random strings over the characters that
// matter (a third of them valid names, by construction).
func TestDNS1123ChecksMatchApimachinery(t *testing.T) {
	check := func(v string) {
		t.Helper()
		if got, want := isDNS1123Label(v), validation.IsDNS1123Label(v); !slices.Equal(got, want) {
			t.Fatalf("isDNS1123Label(%q) = %q, apimachinery says %q", v, got, want)
		}
		if got, want := isDNS1123Subdomain(v), validation.IsDNS1123Subdomain(v); !slices.Equal(got, want) {
			t.Fatalf("isDNS1123Subdomain(%q) = %q, apimachinery says %q", v, got, want)
		}
	}
	for _, v := range []string{"", "a", "-", ".", "a.", ".a", "a..b", "a-", "-a", "a-b", "a.b", "a-.b", "a.-b",
		"A", "a_b", "0", "0-0", "web-1", "kube-system", "my.name.example.com", "x\n", "é",
		strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 253), strings.Repeat("a", 254),
		strings.Repeat("a.", 126) + "a", strings.Repeat("a.", 127)} {
		check(v)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab09-.A_ "
	valid := 0
	for range 200_000 {
		b := make([]byte, rng.IntN(70))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		if rng.IntN(3) == 0 { // a valid subdomain: labels of a-z0-9 with inner dashes
			for i := range b {
				switch {
				case b[i] == '.' && i > 0 && i < len(b)-1 && b[i-1] != '.':
				case b[i] == '-' && i > 0 && i < len(b)-1 && b[i-1] != '.' && b[i+1] != '.':
				default:
					b[i] = "ab09"[rng.IntN(4)]
				}
			}
		}
		v := string(b)
		if len(validation.IsDNS1123Subdomain(v)) == 0 {
			valid++
		}
		check(v)
	}
	if valid < 20_000 {
		t.Fatalf("only %d of the random strings were valid subdomains: the test checks too few", valid)
	}
}

func BenchmarkDNS1123Subdomain(b *testing.B) {
	for b.Loop() {
		if isDNS1123Subdomain("registry-7f9c4-abcde.example.com") != nil {
			b.Fatal("invalid")
		}
	}
}

func BenchmarkDNS1123SubdomainApimachinery(b *testing.B) {
	for b.Loop() {
		if validation.IsDNS1123Subdomain("registry-7f9c4-abcde.example.com") != nil {
			b.Fatal("invalid")
		}
	}
}
