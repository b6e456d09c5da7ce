package ingress

import (
	"net/url"
	"testing"
)

// FuzzActorPath: any path either parses into names that pass checkName
// and whose escaped form parses back to the same actor, or is refused; it
// never panics.
func FuzzActorPath(f *testing.F) {
	for _, s := range []string{"/actor/counter/a", "/actor/c/n/rest/x", "/actor/a%2Fb/c%00", "/actor//x", "/actor/%ff/x",
		"/actor/c/" + string(make([]byte, 300)), "/actor/c/n%2", "/actor/%E2%9C%93/%20"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, escaped string) {
		a, rest, err := parseActorPath(escaped)
		if err != nil {
			return
		}
		if checkName("class", a.Class) != nil || checkName("name", a.Name) != nil {
			t.Fatalf("%q parsed into bad names %+v", escaped, a)
		}
		escaped2 := "/actor/" + url.PathEscape(a.Class) + "/" + url.PathEscape(a.Name)
		b, _, err := parseActorPath(escaped2)
		if err != nil || b != a {
			t.Fatalf("%q: %+v escaped as %q parses as %+v, %v", escaped, a, escaped2, b, err)
		}
		_ = rest
	})
}
