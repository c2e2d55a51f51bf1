%% @doc A FIFO queue with a bound: adding to a full queue is refused (the caller drops
%% and counts). Pure.
-module(riak_events_bqueue).

-export([new/1, in/2, out/1, len/1, set_max/2]).

-export_type([bqueue/1]).

-opaque bqueue(Item) :: {non_neg_integer(), pos_integer(), queue:queue(Item)}.

%% @doc An empty queue holding at most `Max' items.
-spec new(pos_integer()) -> bqueue(_).
new(Max) when is_integer(Max), Max > 0 -> {0, Max, queue:new()}.

%% @doc Add an item at the back, or `full'.
-spec in(Item, bqueue(Item)) -> {ok, bqueue(Item)} | full.
in(_Item, {Len, Max, _}) when Len >= Max -> full;
in(Item, {Len, Max, Q}) -> {ok, {Len + 1, Max, queue:in(Item, Q)}}.

%% @doc Take the item at the front.
-spec out(bqueue(Item)) -> {Item, bqueue(Item)} | empty.
out({0, _, _}) -> empty;
out({Len, Max, Q}) ->
    {{value, Item}, Q1} = queue:out(Q),
    {Item, {Len - 1, Max, Q1}}.

%% @doc The number of items.
-spec len(bqueue(_)) -> non_neg_integer().
len({Len, _, _}) -> Len.

%% @doc Change the bound; items beyond a lowered bound stay until taken.
-spec set_max(pos_integer(), bqueue(Item)) -> bqueue(Item).
set_max(Max, {Len, _, Q}) when is_integer(Max), Max > 0 -> {Len, Max, Q}.
