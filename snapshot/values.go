package snapshot

import (
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
)

// The writer sends district documents in protobuf's wire form, encoded
// once per chunk (wire.go); every other document goes through the
// Firestore client, which encodes the layout types by their tags.

// deleteWrite deletes document name (nothing happens when it is missing).
func deleteWrite(name string) *pb.Write {
	return &pb.Write{Operation: &pb.Write_Delete{Delete: name}}
}
