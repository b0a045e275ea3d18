//go:build !unix

package main

// giveToDirOwner changes nothing where files have no unix owner.
func giveToDirOwner(string) error { return nil }
