use super::*;

#[test]
fn frames_round_trip_and_foreign_bytes_are_ignored() {
    let f = Frame { from: Uuid::now_v7(), topic: Topic::Runs, body: Bytes::from_static(b"{\"a\":1}") };
    assert_eq!(Frame::decode(&f.encode()), Some(f));
    assert_eq!(Frame::decode(b""), None);
    assert_eq!(Frame::decode(&[1, 2, 3]), None, "too short for a sender id");
    let mut local_only = Frame { from: Uuid::nil(), topic: Topic::Reconnected, body: Bytes::new() }.encode();
    assert_eq!(Frame::decode(&local_only), None, "the local-only topic never comes off the wire");
    local_only[0] = 9;
    assert_eq!(Frame::decode(&local_only), None);
}

#[tokio::test]
async fn the_in_process_bus_delivers_to_local_subscribers_in_order() {
    let me = Uuid::now_v7();
    let bus = InProcessBus::new(me);
    assert!(!bus.is_shared() && bus.is_connected());
    let mut rx = bus.subscribe();
    for i in 0..3u8 {
        bus.publish(Topic::Caches, Bytes::from(vec![i]));
    }
    for i in 0..3u8 {
        let f = rx.recv().await.unwrap();
        assert_eq!((f.from, f.topic, f.body.as_ref()), (me, Topic::Caches, &[i][..]));
    }
}
