package compose

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// composeFile is the stack's compose file, at the repository's root.
const composeFile = "../../docker-compose.yml"

// loadProject reads the compose file as Docker Compose v2 does (the same loader and
// the Compose Specification's schema, so an unknown or misplaced key fails), with
// env as the environment.
func loadProject(t *testing.T, env map[string]string) *types.Project {
	t.Helper()
	var kv []string
	for k, v := range env {
		kv = append(kv, k+"="+v)
	}
	opts, err := cli.NewProjectOptions([]string{composeFile}, cli.WithName("toolgate"), cli.WithEnv(kv))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	return p
}

// TestComposeFile checks what the stack promises: the services, health checks that
// need no shell, start order where Compose honours it, every role waiting by itself
// where it does not (podman-compose), and the published ports.
func TestComposeFile(t *testing.T) {
	p := loadProject(t, nil)
	names := p.ServiceNames()
	slices.Sort(names)
	want := []string{"bootstrap", "bus-init", "demo-1", "demo-2", "edge-1", "edge-2", "nats-1", "nats-2", "nats-3"}
	if !slices.Equal(names, want) {
		t.Fatalf("services %v, want %v", names, want)
	}
	nats := []string{"nats-1", "nats-2", "nats-3"}
	for name, s := range p.Services {
		if s.Image != "toolgate:latest" || s.PullPolicy != types.PullPolicyNever {
			t.Errorf("%s: image %q, pull policy %q: want the locally built toolgate:latest, never pulled", name, s.Image, s.PullPolicy)
		}
		if name == "bootstrap" || name == "bus-init" {
			continue // a one-shot: its exit status is its health
		}
		hc := s.HealthCheck
		if hc == nil || len(hc.Test) < 4 || hc.Test[0] != "CMD" || hc.Test[1] != "/usr/local/bin/toolgate" || hc.Test[2] != "health" {
			t.Errorf("%s: health check %v: want [CMD /usr/local/bin/toolgate health URL] (the image has no shell)", name, hc)
		}
		if slices.Contains(nats, name) {
			continue
		}
		if s.Environment["TOOLGATE_WAIT"] == nil || s.Environment["TOOLGATE_REPLICAS"] == nil || *s.Environment["TOOLGATE_REPLICAS"] != "3" {
			t.Errorf("%s: TOOLGATE_WAIT and TOOLGATE_REPLICAS=3 must be set: %v", name, s.Environment)
		}
		for _, n := range nats {
			if d, ok := s.DependsOn[n]; !ok || d.Condition != types.ServiceConditionHealthy {
				t.Errorf("%s: does not wait for %s to be healthy: %+v", name, n, s.DependsOn)
			}
		}
	}
	for _, edge := range []string{"edge-1", "edge-2"} {
		s := p.Services[edge]
		if d := s.DependsOn["bootstrap"]; d.Condition != types.ServiceConditionCompletedSuccessfully {
			t.Errorf("%s: does not wait for the bootstrap: %+v", edge, s.DependsOn)
		}
		if !strings.HasSuffix(s.HealthCheck.Test[3], "/readyz") {
			t.Errorf("%s: health check %v: want /readyz", edge, s.HealthCheck.Test)
		}
	}
	b := p.Services["bootstrap"]
	if !slices.ContainsFunc(b.Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Type == types.VolumeTypeBind && strings.HasSuffix(v.Source, "/.toolgate-compose") && v.Target == "/export"
	}) || b.Environment["TOOLGATE_EXPORT"] == nil || *b.Environment["TOOLGATE_EXPORT"] != "/export" {
		t.Errorf("bootstrap: the keys are not exported to ./.toolgate-compose: %+v %v", b.Volumes, b.Environment)
	}
}

// TestComposeBusIsSecured checks that the stack runs its bus authenticated and over
// TLS: bus-init makes the security first, the NATS nodes admit only its users over
// TLS, and every other role connects over TLS with credentials of its own role.
func TestComposeBusIsSecured(t *testing.T) {
	p := loadProject(t, nil)
	env := func(svc, name string) string {
		if v := p.Services[svc].Environment[name]; v != nil {
			return *v
		}
		return ""
	}
	init := p.Services["bus-init"]
	if init.Command[0] != "creds" || init.Command[1] != "init" || env("bus-init", "TOOLGATE_CREDS_DIR") == "" || env("bus-init", "TOOLGATE_CERTS_DIR") == "" ||
		!slices.ContainsFunc(init.Volumes, func(v types.ServiceVolumeConfig) bool {
			return v.Type == types.VolumeTypeBind && strings.HasSuffix(v.Source, "/.toolgate-compose") && v.Target == env("bus-init", "TOOLGATE_EXPORT")
		}) {
		t.Errorf("bus-init: %v %v %+v", init.Command, init.Environment, init.Volumes)
	}
	for _, n := range []string{"nats-1", "nats-2", "nats-3"} {
		if d := p.Services[n].DependsOn["bus-init"]; d.Condition != types.ServiceConditionCompletedSuccessfully {
			t.Errorf("%s: does not wait for bus-init: %+v", n, p.Services[n].DependsOn)
		}
		for _, v := range []string{"TOOLGATE_NATS_AUTH", "TOOLGATE_NATS_TLS_CA", "TOOLGATE_NATS_TLS_CERT", "TOOLGATE_NATS_TLS_KEY", "TOOLGATE_WAIT"} {
			if env(n, v) == "" {
				t.Errorf("%s: %s is not set: the node would admit anyone, or speak plaintext", n, v)
			}
		}
	}
	// The demo workers run on their tools' credentials, which bus-init issues, as a
	// tool team's worker does: never the admin's.
	if env("bus-init", "TOOLGATE_CREDS_DEMO") != "true" {
		t.Errorf("bus-init does not issue the demo workers' credentials (TOOLGATE_CREDS_DEMO %q)", env("bus-init", "TOOLGATE_CREDS_DEMO"))
	}
	roles := map[string]string{"edge-1": "edge.creds", "edge-2": "edge.creds", "bootstrap": "admin.creds", "demo-1": "demo.creds", "demo-2": "demo.creds"}
	for svc, creds := range roles {
		if !strings.HasSuffix(env(svc, "TOOLGATE_NATS_CREDS"), "/creds/"+creds) || env(svc, "TOOLGATE_NATS_TLS_CA") == "" {
			t.Errorf("%s: credentials %q, CA %q: want %s and the CA", svc, env(svc, "TOOLGATE_NATS_CREDS"), env(svc, "TOOLGATE_NATS_TLS_CA"), creds)
		}
		for _, u := range strings.Split(env(svc, "TOOLGATE_NATS"), ",") {
			if !strings.HasPrefix(u, "tls://") {
				t.Errorf("%s: NATS URL %q is not tls://", svc, u)
			}
		}
		if !slices.ContainsFunc(p.Services[svc].Volumes, func(v types.ServiceVolumeConfig) bool { return v.Source == "bus" && v.ReadOnly }) {
			t.Errorf("%s: does not read the bus volume: %+v", svc, p.Services[svc].Volumes)
		}
	}
}

func TestComposePorts(t *testing.T) {
	published := func(p *types.Project, svc string) string {
		ports := p.Services[svc].Ports
		if len(ports) != 1 {
			t.Fatalf("%s publishes %v", svc, ports)
		}
		return fmt.Sprintf("%s:%s->%d", ports[0].HostIP, ports[0].Published, ports[0].Target)
	}
	for _, c := range []struct {
		env          map[string]string
		edge1, edge2 string
	}{
		{nil, "127.0.0.1:8080->8080", "127.0.0.1:8081->8080"},
		{map[string]string{"TOOLGATE_PORT": "9080", "TOOLGATE_PORT_2": "9081"}, "127.0.0.1:9080->8080", "127.0.0.1:9081->8080"},
	} {
		p := loadProject(t, c.env)
		if got := published(p, "edge-1"); !strings.HasPrefix(got, c.edge1) {
			t.Errorf("with %v edge-1 is published on %s, want %s", c.env, got, c.edge1)
		}
		if got := published(p, "edge-2"); !strings.HasPrefix(got, c.edge2) {
			t.Errorf("with %v edge-2 is published on %s, want %s", c.env, got, c.edge2)
		}
	}
}
