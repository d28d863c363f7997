// Package kfakeresp builds the error answers the tests give through
// kfake's request control (kfake.Cluster.ControlKey): one error code on
// every partition a request asks for.
package kfakeresp

import "github.com/twmb/franz-go/pkg/kmsg"

// FetchError answers a FetchRequest with code on every partition it asks
// for.
func FetchError(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.Version = req.Version
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// ListOffsetsError answers a ListOffsetsRequest with code on every
// partition it asks for.
func ListOffsetsError(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	resp.Version = req.Version
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
