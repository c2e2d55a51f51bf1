-module(riak_events_config_tests).

-include("riak_events_test.hrl").

defaults_test() ->
    {Config, []} = riak_events_config:from_list([]),
    ?assertEqual(riak_events_config:defaults(), Config),
    ?assertMatch(#{companion_port := 5000, companion_path := "/v1/keys",
                   events_bucket_type := <<"events">>, events_bucket := <<"events">>,
                   ring := riak_core}, Config).

values_test() ->
    {Config, Errors} = riak_events_config:from_list(
                         [{companion_port, 8200},
                          {companion_urls, [{'riak@10.0.0.1', "http://10.0.0.1:9000"},
                                            {"riak@10.0.0.2", <<"http://h2:9000/prefix/">>}]},
                          {events_bucket_type, "ev"}, {events_bucket, <<"b">>},
                          {timeout_ms, 500}, {queue_max, 10}, {unknown, 1}]),
    ?assertEqual([], Errors),
    ?assertMatch(#{companion_port := 8200, events_bucket_type := <<"ev">>,
                   events_bucket := <<"b">>, timeout_ms := 500, queue_max := 10,
                   companion_urls := #{'riak@10.0.0.1' := "http://10.0.0.1:9000",
                                       'riak@10.0.0.2' := "http://h2:9000/prefix/"}},
                 Config).

bad_values_fall_back_test() ->
    {Config, Errors} = riak_events_config:from_list(
                         [{companion_port, 0}, {timeout_ms, -1}, {queue_max, many},
                          {companion_urls, #{'a@b' => "https://x"}},
                          {companion_path, "v1/keys"}, {events_bucket, <<>>}]),
    ?assertEqual(riak_events_config:defaults(), Config),
    ?assertEqual(6, length(Errors)).

url_test_() ->
    P = fun riak_events_http:parse_url/1,
    [?_assertEqual({ok, #{host => "127.0.0.1", port => 5000, path => ""}},
                   P("http://127.0.0.1:5000")),
     ?_assertEqual({ok, #{host => "h", port => 80, path => "/p"}}, P("http://h/p/")),
     ?_assertEqual({ok, #{host => "::1", port => 5000, path => ""}}, P("http://[::1]:5000")),
     ?_assertMatch({error, {unsupported_scheme, "https"}}, P("https://h:1")),
     ?_assertMatch({error, _}, P("no url"))].

request_test() ->
    {ok, Url} = riak_events_http:parse_url("http://10.0.0.1:5000"),
    ?assertEqual(<<"POST /v1/keys HTTP/1.1\r\nHost: 10.0.0.1:5000\r\n"
                   "Content-Type: application/json\r\nContent-Length: 2\r\n"
                   "Connection: close\r\nUser-Agent: riak_events_hook\r\n\r\n{}">>,
                 iolist_to_binary(riak_events_http:request(Url, "/v1/keys", <<"{}">>))).
