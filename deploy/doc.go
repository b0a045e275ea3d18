// Package deploy holds what runs toolgate outside one process, and its tests: the
// image (image/), the compose stack's settings for Podman (containers.conf), the
// Kubernetes manifests (kubernetes/), and the tests that run the compose stack in
// real containers (compose/). It is a module of its own so that the Kubernetes API
// types and the compose loader stay out of the gateway's dependencies.
package deploy
