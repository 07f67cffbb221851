package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
)

// AbandonTransaction leaves a read-write transaction open on project, as a
// writer killed inside one leaves it: it begins the transaction, reads in
// it the documents docs names and every document of the collections
// collections names (paths below the database's documents, such as
// "snapshots/2026-11-20" and "snapshots/2026-11-20/districts"), and
// neither commits nor rolls it back. Firestore and the emulator keep the
// locks of its reads until it expires, 60 s after its last use. (A
// transaction cannot hold writes open: Firestore takes them only with its
// commit.) It returns the transaction's id and how many documents it read.
func (e *Emulator) AbandonTransaction(ctx context.Context, project string, docs, collections []string) ([]byte, int, error) {
	api, err := e.APIClient(ctx)
	if err != nil {
		return nil, 0, err
	}
	// Closing the connection is what the killed writer's death does too.
	defer api.Close()
	db := "projects/" + project + "/databases/(default)"
	begun, err := api.BeginTransaction(ctx, &pb.BeginTransactionRequest{Database: db})
	if err != nil {
		return nil, 0, fmt.Errorf("beginning the transaction: %w", err)
	}
	tx := begun.Transaction
	read := 0
	if len(docs) > 0 {
		names := make([]string, len(docs))
		for i, d := range docs {
			names[i] = db + "/documents/" + d
		}
		st, err := api.BatchGetDocuments(ctx, &pb.BatchGetDocumentsRequest{Database: db, Documents: names,
			ConsistencySelector: &pb.BatchGetDocumentsRequest_Transaction{Transaction: tx}})
		if err != nil {
			return nil, 0, fmt.Errorf("reading documents in the transaction: %w", err)
		}
		for {
			res, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, 0, fmt.Errorf("reading documents in the transaction: %w", err)
			}
			if res.GetFound() != nil {
				read++
			}
		}
	}
	for _, coll := range collections {
		parent, id := db+"/documents", coll
		if i := strings.LastIndex(coll, "/"); i >= 0 {
			parent, id = db+"/documents/"+coll[:i], coll[i+1:]
		}
		st, err := api.RunQuery(ctx, &pb.RunQueryRequest{Parent: parent,
			QueryType: &pb.RunQueryRequest_StructuredQuery{StructuredQuery: &pb.StructuredQuery{
				From: []*pb.StructuredQuery_CollectionSelector{{CollectionId: id}}}},
			ConsistencySelector: &pb.RunQueryRequest_Transaction{Transaction: tx}})
		if err != nil {
			return nil, 0, fmt.Errorf("querying %s in the transaction: %w", coll, err)
		}
		for {
			res, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, 0, fmt.Errorf("querying %s in the transaction: %w", coll, err)
			}
			if res.GetDocument() != nil {
				read++
			}
		}
	}
	return tx, read, nil
}
