package controllers
import ("testing";"context";"skiff.dev/skiff/api";"skiff.dev/skiff/client/fake")
func TestDbg(t *testing.T){
	rs := rsFor(deployment(2, "nginx:1"), 1, 2)
	c := fake.New(rs, pod(rs,"a"))
	err := c.Delete(context.Background(), podKind(), ns, "a", api.DeleteOptions{})
	o, err2 := c.Get(context.Background(), podKind(), ns, "a")
	t.Logf("%v %v %+v", err, err2, o)
}
