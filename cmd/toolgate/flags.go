package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
)

// envOr returns the environment variable name, or def when it is unset: every flag's
// default can come from a TOOLGATE_* variable.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%q: port must be a number from 0 to 65535", addr)
	}
	return host, port, nil
}
