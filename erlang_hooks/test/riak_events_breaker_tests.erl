-module(riak_events_breaker_tests).

-include("riak_events_test.hrl").

-define(B, riak_events_breaker).

opens_after_threshold_test() ->
    B0 = ?B:new(),
    {counted, B1} = ?B:failure(0, 3, 1000, B0),
    {counted, B2} = ?B:failure(1, 3, 1000, B1),
    ?assertEqual({true, B2}, ?B:allow(2, B2)),
    {opened, B3} = ?B:failure(2, 3, 1000, B2),
    ?assertEqual({open, 3}, ?B:status(B3)),
    ?assertMatch({false, _}, ?B:allow(500, B3)),
    ?assertMatch({false, _}, ?B:allow(1001, B3)).

success_resets_count_test() ->
    {counted, B1} = ?B:failure(0, 2, 1000, ?B:new()),
    B2 = ?B:success(B1),
    {counted, B3} = ?B:failure(1, 2, 1000, B2),
    ?assertEqual({closed, 1}, ?B:status(B3)).

half_open_probe_test() ->
    {opened, Open} = ?B:failure(0, 1, 1000, ?B:new()),
    {true, Probe} = ?B:allow(1000, Open),
    ?assertEqual(half_open, element(1, ?B:status(Probe))),
    %% One probe at a time.
    ?assertMatch({false, _}, ?B:allow(1001, Probe)),
    %% The probe fails: open for another cool-down from now.
    {opened, Again} = ?B:failure(1500, 1, 1000, Probe),
    ?assertMatch({false, _}, ?B:allow(2499, Again)),
    {true, Probe2} = ?B:allow(2500, Again),
    %% The probe succeeds: closed.
    ?assertEqual({closed, 0}, ?B:status(?B:success(Probe2))).

late_failure_while_open_test() ->
    {opened, Open} = ?B:failure(0, 1, 1000, ?B:new()),
    {counted, Still} = ?B:failure(10, 1, 1000, Open),
    ?assertMatch({true, _}, ?B:allow(1000, Still)).
