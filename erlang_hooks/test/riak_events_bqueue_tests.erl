-module(riak_events_bqueue_tests).

-include("riak_events_test.hrl").

-define(Q, riak_events_bqueue).

bound_and_order_test() ->
    {ok, Q1} = ?Q:in(a, ?Q:new(2)),
    {ok, Q2} = ?Q:in(b, Q1),
    ?assertEqual(full, ?Q:in(c, Q2)),
    ?assertEqual(2, ?Q:len(Q2)),
    {a, Q3} = ?Q:out(Q2),
    {ok, Q4} = ?Q:in(c, Q3),
    {b, Q5} = ?Q:out(Q4),
    {c, Q6} = ?Q:out(Q5),
    ?assertEqual(empty, ?Q:out(Q6)).

set_max_test() ->
    {ok, Q1} = ?Q:in(a, ?Q:new(2)),
    {ok, Q2} = ?Q:in(b, Q1),
    Q3 = ?Q:set_max(1, Q2),
    ?assertEqual(full, ?Q:in(c, Q3)),
    {a, Q4} = ?Q:out(Q3),
    ?assertEqual(full, ?Q:in(c, Q4)),
    {b, Q5} = ?Q:out(Q4),
    ?assertMatch({ok, _}, ?Q:in(c, Q5)).
