package registry

// MarkBehind tells v that the follower of bucket is behind or current again, as the
// follower does when its consumer is lost or caught up: for the tests of View.Confirm,
// which cannot make a follower lag on purpose.
func MarkBehind(v *View, bucket string, behind bool) { v.current[viewBucket[bucket]].Store(!behind) }
