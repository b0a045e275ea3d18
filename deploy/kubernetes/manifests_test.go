// Package kubernetes checks the Kubernetes manifests beside it and the values file of
// the NATS Helm chart: each decodes strictly into its API type, so a misspelt field
// fails, and what the pieces say of each other (selectors, probes, ports, the NATS
// Service, the secret's files) agrees.
package kubernetes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// manifests decodes every document of every *.yaml file here into its API type,
// strictly, and returns them by kind and name.
func manifests(t *testing.T) map[string]any {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	objs := map[string]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range splitDocuments(b) {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s document %d: %v", f, i+1, err)
			}
			obj, err := newObject(tm)
			if err != nil {
				t.Fatalf("%s document %d: %v", f, i+1, err)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s document %d (%s): %v", f, i+1, tm.Kind, err)
			}
			name := obj.(metav1.Object).GetName()
			key := tm.Kind + "/" + name
			if _, dup := objs[key]; dup {
				t.Fatalf("%s: %s defined twice", f, key)
			}
			objs[key] = obj
		}
	}
	return objs
}

// splitDocuments splits a YAML stream on its "---" lines, leaving out empty documents.
func splitDocuments(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(stripComments(d)) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

func stripComments(s string) string {
	var out bytes.Buffer
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			out.WriteString(line + "\n")
		}
	}
	return out.String()
}

// newObject is the API type of a document; a kind the deployment has no use for is
// an error, as is an API version that is not the one served for it.
func newObject(tm metav1.TypeMeta) (any, error) {
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, nil
	case "v1 Service":
		return &corev1.Service{}, nil
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "batch/v1 Job":
		return &batchv1.Job{}, nil
	}
	return nil, fmt.Errorf("unexpected apiVersion %q kind %q", tm.APIVersion, tm.Kind)
}

func get[T any](t *testing.T, objs map[string]any, key string) T {
	t.Helper()
	o, ok := objs[key].(T)
	if !ok {
		t.Fatalf("no %s among the manifests", key)
	}
	return o
}

func selects(t *testing.T, sel *metav1.LabelSelector, podLabels map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return !s.Empty() && s.Matches(labels.Set(podLabels))
}

func env(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// secretFiles maps each file a container of pod reads from a mounted Secret to the
// Secret's name and key.
func secretFiles(pod corev1.PodSpec, c corev1.Container) map[string]string {
	files := map[string]string{}
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				for _, it := range v.Secret.Items {
					files[filepath.Join(m.MountPath, it.Path)] = v.Secret.SecretName + "/" + it.Key
				}
			}
		}
	}
	return files
}

// natsService is the client URL of the Service the NATS chart makes with our values.
func natsService(t *testing.T) string {
	return "tls://" + natsValuesFile(t).FullnameOverride + ":4222"
}

func TestManifests(t *testing.T) {
	objs := manifests(t)
	nats := natsService(t)

	t.Run("every Deployment selects its own pods, runs the image as non-root, and joins the chart's NATS", func(t *testing.T) {
		for key, o := range objs {
			d, ok := o.(*appsv1.Deployment)
			if !ok {
				continue
			}
			if !selects(t, d.Spec.Selector, d.Spec.Template.Labels) {
				t.Errorf("%s: its selector does not match its pod template's labels", key)
			}
			sc := d.Spec.Template.Spec.SecurityContext
			if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
				t.Errorf("%s: runAsNonRoot is not set", key)
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				if !strings.HasPrefix(c.Image, "toolgate:") {
					t.Errorf("%s: image %q", key, c.Image)
				}
				if got := env(c, "TOOLGATE_NATS"); got != nats {
					t.Errorf("%s: TOOLGATE_NATS %q, the chart's Service is %q", key, got, nats)
				}
				// The bus is secured: each role connects with its credentials and the CA,
				// files of a Secret it mounts.
				files := secretFiles(d.Spec.Template.Spec, c)
				for _, name := range []string{"TOOLGATE_NATS_CREDS", "TOOLGATE_NATS_TLS_CA"} {
					if f, ok := files[env(c, name)]; !ok || !strings.HasPrefix(f, "toolgate-bus/") {
						t.Errorf("%s: %s %q is no file of the toolgate-bus Secret it mounts (%v)", key, name, env(c, name), files)
					}
				}
				if d.Spec.Template.Spec.SecurityContext.FSGroup == nil {
					t.Errorf("%s: no fsGroup: the non-root user cannot read the Secret's files", key)
				}
				if got := env(c, "TOOLGATE_REPLICAS"); got != "3" {
					t.Errorf("%s: TOOLGATE_REPLICAS %q, want 3 (a 3-node JetStream cluster)", key, got)
				}
				for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
					if p == nil || p.HTTPGet == nil {
						t.Errorf("%s: container %s lacks an HTTP probe", key, c.Name)
						continue
					}
					if !slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == p.HTTPGet.Port.StrVal }) {
						t.Errorf("%s: a probe names port %q, which the container does not declare", key, p.HTTPGet.Port.String())
					}
				}
			}
		}
	})

	t.Run("the edges are probed on /readyz and /healthz and read the secret's files", func(t *testing.T) {
		d := get[*appsv1.Deployment](t, objs, "Deployment/toolgate-edge")
		if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
			t.Errorf("edge replicas %v: want at least 2", d.Spec.Replicas)
		}
		c := d.Spec.Template.Spec.Containers[0]
		if c.Args[0] != "edge" {
			t.Errorf("edge args %q", c.Args)
		}
		if c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.HTTPGet.Path != "/healthz" {
			t.Errorf("edge probes: readiness %s, liveness %s", c.ReadinessProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path)
		}
		mounts := secretFiles(d.Spec.Template.Spec, c)
		if !strings.HasSuffix(mounts[env(c, "TOOLGATE_NATS_CREDS")], "/edge.creds") {
			t.Errorf("the edges connect as %q, not the edge role", mounts[env(c, "TOOLGATE_NATS_CREDS")])
		}
		for _, name := range []string{"TOOLGATE_LINK_SECRET_FILE", "TOOLGATE_ADMIN_KEY_FILE"} {
			if _, ok := mounts[env(c, name)]; !ok {
				t.Errorf("%s %q is no file of a mounted secret (%v)", name, env(c, name), mounts)
			}
		}
	})

	t.Run("the Service and the PodDisruptionBudget select the edges", func(t *testing.T) {
		pods := get[*appsv1.Deployment](t, objs, "Deployment/toolgate-edge").Spec.Template
		svc := get[*corev1.Service](t, objs, "Service/toolgate-edge")
		if !selects(t, &metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, pods.Labels) {
			t.Errorf("the Service selects %v, the edges are %v", svc.Spec.Selector, pods.Labels)
		}
		for _, p := range svc.Spec.Ports {
			if !slices.ContainsFunc(pods.Spec.Containers[0].Ports, func(cp corev1.ContainerPort) bool { return cp.Name == p.TargetPort.StrVal }) {
				t.Errorf("the Service's port %s targets %q, which the edge does not declare", p.Name, p.TargetPort.String())
			}
		}
		pdb := get[*policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget/toolgate-edge")
		if !selects(t, pdb.Spec.Selector, pods.Labels) {
			t.Errorf("the PodDisruptionBudget selects %v, the edges are %v", pdb.Spec.Selector, pods.Labels)
		}
		if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() < 1 {
			t.Errorf("the PodDisruptionBudget keeps %v edges", pdb.Spec.MinAvailable)
		}
	})

	t.Run("the demo workers serve their health and run two pods", func(t *testing.T) {
		d := get[*appsv1.Deployment](t, objs, "Deployment/toolgate-demo")
		c := d.Spec.Template.Spec.Containers[0]
		if strings.Join(c.Args, " ") != "worker demo" || env(c, "TOOLGATE_HEALTH_LISTEN") == "" {
			t.Errorf("demo: args %q, TOOLGATE_HEALTH_LISTEN %q", c.Args, env(c, "TOOLGATE_HEALTH_LISTEN"))
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
			t.Errorf("demo replicas %v: want at least 2, so one can stop", d.Spec.Replicas)
		}
	})

	t.Run("the demo workers run on their tools' credentials, never the admin's", func(t *testing.T) {
		d := get[*appsv1.Deployment](t, objs, "Deployment/toolgate-demo")
		c := d.Spec.Template.Spec.Containers[0]
		files := secretFiles(d.Spec.Template.Spec, c)
		if files[env(c, "TOOLGATE_NATS_CREDS")] != "toolgate-bus/demo.creds" {
			t.Errorf("the demo workers connect as %q, want toolgate-bus/demo.creds", files[env(c, "TOOLGATE_NATS_CREDS")])
		}
		for path, key := range files {
			if strings.HasSuffix(key, "/admin.creds") {
				t.Errorf("the demo workers mount the admin's credentials at %s", path)
			}
		}
	})

	t.Run("a Job makes the email tool's state with the admin's credentials", func(t *testing.T) {
		j := get[*batchv1.Job](t, objs, "Job/toolgate-demo-state")
		pod := j.Spec.Template.Spec
		if len(pod.Containers) != 1 || pod.RestartPolicy != corev1.RestartPolicyOnFailure {
			t.Fatalf("the Job's pod: %d containers, restart policy %q", len(pod.Containers), pod.RestartPolicy)
		}
		c := pod.Containers[0]
		if strings.Join(c.Args, " ") != "state create email" || !strings.HasPrefix(c.Image, "toolgate:") {
			t.Errorf("the Job runs %s %q", c.Image, c.Args)
		}
		if got := env(c, "TOOLGATE_NATS"); got != nats {
			t.Errorf("the Job's TOOLGATE_NATS %q, the chart's Service is %q", got, nats)
		}
		files := secretFiles(pod, c)
		if files[env(c, "TOOLGATE_NATS_CREDS")] != "toolgate-bus/admin.creds" || files[env(c, "TOOLGATE_NATS_TLS_CA")] != "toolgate-bus/ca.pem" {
			t.Errorf("the Job connects with %v", files)
		}
		if env(c, "TOOLGATE_REPLICAS") != "3" || env(c, "TOOLGATE_WAIT") == "" {
			t.Errorf("the Job: TOOLGATE_REPLICAS %q (want 3), TOOLGATE_WAIT %q", env(c, "TOOLGATE_REPLICAS"), env(c, "TOOLGATE_WAIT"))
		}
		if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.FSGroup == nil {
			t.Errorf("the Job's pod must run as non-root with an fsGroup: %+v", sc)
		}
	})
}

// natsValues holds the keys of the NATS chart's values that the deployment sets (see
// the chart's values.yaml): decoding strictly into it fails on a key the chart would
// silently ignore.
type natsValues struct {
	FullnameOverride string `json:"fullnameOverride"`
	TLSCA            struct {
		Enabled    bool   `json:"enabled"`
		SecretName string `json:"secretName"`
		Key        string `json:"key"`
	} `json:"tlsCA"`
	Config struct {
		NATS struct {
			TLS chartTLS `json:"tls"`
		} `json:"nats"`
		Cluster struct {
			Enabled  bool     `json:"enabled"`
			Replicas int      `json:"replicas"`
			TLS      chartTLS `json:"tls"`
		} `json:"cluster"`
		Resolver struct {
			Enabled bool              `json:"enabled"`
			Merge   map[string]string `json:"merge"`
		} `json:"resolver"`
		Merge     map[string]string `json:"merge"`
		JetStream struct {
			Enabled   bool `json:"enabled"`
			FileStore struct {
				PVC struct {
					Size resource.Quantity `json:"size"`
				} `json:"pvc"`
			} `json:"fileStore"`
		} `json:"jetstream"`
		Monitor struct {
			Enabled bool `json:"enabled"`
		} `json:"monitor"`
	} `json:"config"`
	Container struct {
		Patch []jsonPatch `json:"patch"`
	} `json:"container"`
	PodTemplate struct {
		// by topology key, as the chart takes them
		TopologySpreadConstraints map[string]corev1.TopologySpreadConstraint `json:"topologySpreadConstraints"`
		Patch                     []jsonPatch                                `json:"patch"`
	} `json:"podTemplate"`
	PodDisruptionBudget struct {
		Enabled bool `json:"enabled"`
	} `json:"podDisruptionBudget"`
	NatsBox struct {
		Enabled bool `json:"enabled"`
	} `json:"natsBox"`
}

// chartTLS is a tls block of the chart's config.
type chartTLS struct {
	Enabled    bool   `json:"enabled"`
	SecretName string `json:"secretName"`
}

// jsonPatch is one operation of the chart's patch lists, adding to a list.
type jsonPatch struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value"`
}

func natsValuesFile(t *testing.T) natsValues {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("nats", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v natsValues
	if err := yaml.UnmarshalStrict(b, &v); err != nil {
		t.Fatalf("nats/values.yaml: %v", err)
	}
	return v
}

func TestNATSValues(t *testing.T) {
	v := natsValuesFile(t)
	c := v.Config
	if !c.Cluster.Enabled || c.Cluster.Replicas != 3 || !c.JetStream.Enabled {
		t.Errorf("want a 3-node JetStream cluster: cluster %+v, jetstream enabled %v", c.Cluster, c.JetStream.Enabled)
	}
	if c.JetStream.FileStore.PVC.Size.IsZero() {
		t.Error("the JetStream volumes have no size")
	}
	if !c.Monitor.Enabled || !v.PodDisruptionBudget.Enabled {
		t.Errorf("the chart's probes need the monitor (%v); node drains need its PodDisruptionBudget (%v)", c.Monitor.Enabled, v.PodDisruptionBudget.Enabled)
	}
	if v.FullnameOverride == "" {
		t.Error("fullnameOverride names the Service the edges and workers use")
	}
	t.Run("the nodes admit only the deployment's users, over TLS on client and route ports", func(t *testing.T) {
		if !v.TLSCA.Enabled || v.TLSCA.SecretName == "" || !c.NATS.TLS.Enabled || !c.Cluster.TLS.Enabled ||
			c.NATS.TLS.SecretName != v.TLSCA.SecretName || c.Cluster.TLS.SecretName != v.TLSCA.SecretName {
			t.Errorf("TLS: CA %+v, clients %+v, routes %+v", v.TLSCA, c.NATS.TLS, c.Cluster.TLS)
		}
		if !c.Resolver.Enabled || c.Resolver.Merge["type"] != "full" {
			t.Errorf("the resolver %+v: want the NATS-based full resolver, which takes revocations at run time", c.Resolver)
		}
		include := c.Merge["$include"]
		if !strings.HasSuffix(include, "/auth.conf") {
			t.Fatalf("the config includes %q, not the deployment's auth.conf", include)
		}
		var mount corev1.VolumeMount
		var volume corev1.Volume
		if len(v.Container.Patch) != 1 || json.Unmarshal(v.Container.Patch[0].Value, &mount) != nil ||
			len(v.PodTemplate.Patch) != 1 || json.Unmarshal(v.PodTemplate.Patch[0].Value, &volume) != nil {
			t.Fatalf("the patches that mount auth.conf: %+v %+v", v.Container.Patch, v.PodTemplate.Patch)
		}
		// The chart's config is /etc/nats-config/nats.conf; includes are relative to it.
		if filepath.Join("/etc/nats-config", filepath.Dir(include)) != mount.MountPath || mount.Name != volume.Name ||
			volume.ConfigMap == nil || v.Container.Patch[0].Path != "/volumeMounts/-" || v.PodTemplate.Patch[0].Path != "/spec/volumes/-" {
			t.Errorf("auth.conf is included from %s, mounted %+v from %+v", include, mount, volume)
		}
	})
	for key, tsc := range v.PodTemplate.TopologySpreadConstraints {
		if tsc.MaxSkew < 1 || tsc.WhenUnsatisfiable == "" || key == "" {
			t.Errorf("topology spread on %q: %+v", key, tsc)
		}
	}
}
