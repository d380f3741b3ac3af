package abi

import (
	"errors"
	"fmt"
	"testing"
)

func TestInvocationKey(t *testing.T) {
	tests := []struct {
		name string
		in   KeyParts
		want string
	}{
		{"plain", KeyParts{"ShipmentNotifier.onOrderShipped", "Order", "o-1", 3, 0},
			"ShipmentNotifier.onOrderShipped:Order/o-1@3:0"},
		{"another type, same id", KeyParts{"P.h", "Thing", "dup-1", 1, 0}, "P.h:Thing/dup-1@1:0"},
		{"the other type", KeyParts{"P.h", "Other", "dup-1", 1, 0}, "P.h:Other/dup-1@1:0"},
		{"colon and at in the id", KeyParts{"P.h", "T", "a:b@2", 1, 0}, "P.h:T/a%3Ab%402@1:0"},
		{"slash in the id", KeyParts{"P.h", "T", "a/b", 1, 0}, "P.h:T/a%2Fb@1:0"},
		{"slash in the type", KeyParts{"P.h", "T/a", "b", 1, 0}, "P.h:T%2Fa/b@1:0"},
		{"percent is escaped too", KeyParts{"P.h", "T", "a%2Fb", 1, 0}, "P.h:T/a%252Fb@1:0"},
		{"space and control", KeyParts{"P.h", "T", "a b\n\x00", 1, 0}, "P.h:T/a%20b%0A%00@1:0"},
		{"UTF-8 and invalid bytes", KeyParts{"P.h", "T", "größe\xff", 1, 0}, "P.h:T/gr%C3%B6%C3%9Fe%FF@1:0"},
		{"DEL", KeyParts{"P.h", "T", "\x7f", 1, 0}, "P.h:T/%7F@1:0"},
		{"printable punctuation stays", KeyParts{"P.h", "T", `a.b_c-d~e!$&'()*+,;="\[]`, 1, 0},
			`P.h:T/a.b_c-d~e!$&'()*+,;="\[]@1:0`},
		{"empty names", KeyParts{"", "", "", 0, 0}, ":/@0:0"},
		{"large numbers", KeyParts{"P.h", "T", "x", 18446744073709551615, 2147483647},
			"P.h:T/x@18446744073709551615:2147483647"},
		{"subscription escaped", KeyParts{"P:h", "T", "x", 1, 2}, "P%3Ah:T/x@1:2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := InvocationKey(tt.in.Subscription, tt.in.AggregateType, tt.in.AggregateID, tt.in.Version, tt.in.Index)
			if got != tt.want {
				t.Fatalf("InvocationKey = %q, want %q", got, tt.want)
			}
			back, err := ParseInvocationKey(got)
			if err != nil {
				t.Fatal(err)
			}
			if back != tt.in {
				t.Fatalf("ParseInvocationKey(%q) = %+v, want %+v", got, back, tt.in)
			}
		})
	}
}

// TestInvocationKeysDoNotCollide lists tuples an unescaped key would confuse.
func TestInvocationKeysDoNotCollide(t *testing.T) {
	tuples := []KeyParts{
		{"P.h", "Thing", "dup-1", 1, 0},
		{"P.h", "Other", "dup-1", 1, 0},
		{"P.h", "a", "b/c", 1, 0},
		{"P.h", "a/b", "c", 1, 0},
		{"P.h", "T", "x@1:0", 2, 0},
		{"P.h", "T", "x", 1, 0},
		{"P.h", "T", "x@1", 1, 0},
		{"P.h:T", "x", "y", 1, 0},
		{"P.h", "T:x", "y", 1, 0},
		{"P.h", "T", "a%2Fb", 1, 0},
		{"P.h", "T", "a/b", 1, 0},
		{"P.h", "T", "a%3Ab", 1, 0},
		{"P.h", "T", "a:b", 1, 0},
		{"P.h", "T", "x", 1, 1},
		{"P.h", "T", "x", 11, 0},
		{"P.h", "T", "x:1", 1, 0},
	}
	seen := map[string]KeyParts{}
	for _, p := range tuples {
		k := InvocationKey(p.Subscription, p.AggregateType, p.AggregateID, p.Version, p.Index)
		if other, dup := seen[k]; dup {
			t.Errorf("%+v and %+v both have key %q", p, other, k)
		}
		seen[k] = p
	}
}

func TestParseInvocationKeyRefusesWhatItWouldNotWrite(t *testing.T) {
	for _, key := range []string{
		"",
		"P.h",
		"P.h:T",
		"P.h:T/x",
		"P.h:T/x@1",
		"P.h:T/x@1:",
		"P.h:T/x@:0",
		"P.h:T/x@01:0",    // leading zero
		"P.h:T/x@1:00",    // leading zero
		"P.h:T/x@-1:0",    // sign
		"P.h:T/x@1:+0",    // sign
		"P.h:T/x@1:0:1",   // a ':' too many
		"P.h:T/x/y@1:0",   // a raw '/' in the id
		"P.h:T/x@y@1:0",   // a raw '@' in the id
		"P.h:T/a b@1:0",   // a raw space
		"P.h:T/ä@1:0",     // raw UTF-8
		"P.h:T/a%2fb@1:0", // lower-case hex
		"P.h:T/a%41@1:0",  // escapes a byte written as itself
		"P.h:T/a%4@1:0",   // short escape
		"P.h:T/a%@1:0",    // bare '%'
		"P.h:T/a%ZZ@1:0",
		"P.h:T/x@18446744073709551616:0", // overflows
	} {
		if p, err := ParseInvocationKey(key); !errors.Is(err, ErrBadInvocationKey) {
			t.Errorf("ParseInvocationKey(%q) = %+v, %v; want ErrBadInvocationKey", key, p, err)
		}
	}
}

// FuzzInvocationKey: any tuple survives the round trip, so distinct tuples
// have distinct keys; the key is printable ASCII; and any key that parses is
// the key of what it parses to.
func FuzzInvocationKey(f *testing.F) {
	f.Add("P.h", "Thing", "dup-1", uint64(1), uint32(0), "P.h:Other/dup-1@1:0")
	f.Add("P.h", "a/b", "c:d@e%f g", uint64(7), uint32(3), "P.h:T/a%2Fb@1:0")
	f.Add("", "", "", uint64(0), uint32(0), ":/@0:0")
	f.Add("S", "größe", "\xff\x00", uint64(1<<63), uint32(1<<31-1), "x:y/z@1:1")
	f.Fuzz(func(t *testing.T, sub, typ, id string, version uint64, index uint32, other string) {
		in := KeyParts{sub, typ, id, version, int(index)}
		key := InvocationKey(sub, typ, id, version, int(index))
		for i := 0; i < len(key); i++ {
			if key[i] <= ' ' || key[i] >= 0x7f {
				t.Fatalf("key %q has byte %#x outside printable ASCII", key, key[i])
			}
		}
		back, err := ParseInvocationKey(key)
		if err != nil {
			t.Fatalf("ParseInvocationKey(InvocationKey(%+v) = %q): %v", in, key, err)
		}
		if back != in {
			t.Fatalf("round trip of %+v through %q gave %+v", in, key, back)
		}
		if p, err := ParseInvocationKey(other); err == nil {
			if again := InvocationKey(p.Subscription, p.AggregateType, p.AggregateID, p.Version, p.Index); again != other {
				t.Fatalf("%q parses to %+v, whose key is %q", other, p, again)
			}
		}
	})
}

func BenchmarkInvocationKey(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = InvocationKey("ShipmentNotifier.onOrderShipped", "Order", "o-12345", 42, 1)
	}
}

func ExampleInvocationKey() {
	fmt.Println(InvocationKey("ShipmentNotifier.onOrderShipped", "Order", "o-1", 3, 0))
	fmt.Println(InvocationKey("ShipmentNotifier.onOrderShipped", "Order", "a:b/c@d 1", 3, 0))
	// Output:
	// ShipmentNotifier.onOrderShipped:Order/o-1@3:0
	// ShipmentNotifier.onOrderShipped:Order/a%3Ab%2Fc%40d%201@3:0
}

func ExampleParseInvocationKey() {
	p, err := ParseInvocationKey("ShipmentNotifier.onOrderShipped:Order/a%3Ab%2Fc%40d%201@3:0")
	fmt.Printf("%q %q %q %d %d %v\n", p.Subscription, p.AggregateType, p.AggregateID, p.Version, p.Index, err)
	// Output:
	// "ShipmentNotifier.onOrderShipped" "Order" "a:b/c@d 1" 3 0 <nil>
}
