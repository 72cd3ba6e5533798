package runtime

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// IsNotFound reports whether err is the runtime saying an object does not
// exist, which removal paths treat as success.
func IsNotFound(err error) bool { return status.Code(err) == codes.NotFound }
