package snapshotstore

import "github.com/twmb/franz-go/pkg/kmsg"

// FetchError answers a kfake-intercepted FetchRequest (kfake.ControlKey)
// with the error code on every partition it asks for (exported for the
// package's external tests too).
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
