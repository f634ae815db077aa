"""The long text of the Positional encoding page's length experiment: plain English prose written for this project
(a walk along a river, about 1,500 words), under the project's own licence. Nothing in it is copied."""

TITLE = "A day along the river (prose written for viz-model)"

LONG_TEXT = """\
The river begins in the hills as a thin line of water between stones, and for the first few miles it is hard to \
believe that it will ever carry a boat. In the morning the valley is quiet. A farmer opens a gate, a dog runs ahead \
of him across the wet grass, and the sound of the water is the loudest thing for a long way in every direction. \
The path that follows the river was made by people who walked to the market in the town below, and it still bends \
where they chose to bend it, around a large rock, past a spring, under an old oak that has lost half of its branches.

By the time the sun is above the ridge, the river has collected three small streams and become wide enough to \
need a bridge. The first bridge is made of wood. Its boards are grey and soft at the edges, and children who live \
nearby know which of them move when you step on them. On the far side there is a mill that no longer grinds \
anything. Its wheel was taken away many years ago, but the channel that fed it is still there, and in spring the \
water runs through it with a noise like a crowd talking in another room.

Walking on, you pass a field where sheep stand close together, as if they were waiting for someone to explain \
something. A woman is mending a fence with wire and a pair of pliers. She says good morning and asks where you are \
going. When you tell her that you are following the river to the sea, she laughs and says that it is further than \
it looks on a map, because the river does not hurry and neither should anyone who walks beside it.

In the middle of the day the valley opens out. The hills step back, the fields grow larger, and the river begins \
to turn in wide loops, as if it were unsure which way to go. Herons stand in the shallow places. They do not move \
when you come near, and then, all at once, they lift themselves into the air with slow heavy strokes and settle \
again a hundred yards downstream, where they stand exactly as before. There are willows along the banks, and under \
them the water is dark and still, and sometimes a fish breaks the surface and leaves a ring that spreads until it \
touches both sides.

The first village on the river is built around a square with a church at one end and a shop at the other. The \
shop sells bread, newspapers, rope, seeds, string, batteries and postcards that show the village as it was fifty \
years ago. The man behind the counter has a list of the boats that pass through the lock below the village, written \
in pencil in a school exercise book. He says that in summer there are twenty boats a day and in winter there may \
be none for a week. He likes the winter better. In winter, he says, you can hear the lock gates creak from the \
shop, and you know that someone is going somewhere for a reason.

The lock itself is a narrow stone chamber with heavy gates at each end. When a boat comes down the river, the \
keeper closes the upper gates behind it and opens small doors in the lower gates, and the water in the chamber \
falls slowly until it is level with the river below. Then the lower gates are pushed open and the boat goes on. \
It takes a quarter of an hour. Nobody seems to mind. People on the boats talk to the people on the bank, and \
sometimes they pass things across the gap: a cup of tea, a rope, a piece of advice about the weather.

After the lock the river is a different river. It is deeper and slower, and it carries more than water: leaves, \
sticks, a child's ball, the reflections of clouds. The path becomes a towpath, flat and straight, made for horses \
that once pulled barges loaded with coal and grain. The horses are gone, but the rings they were tied to are still \
set into the stones, and in places the rope has worn grooves into the edge of the bridges where it rubbed for a \
hundred years.

In the afternoon it begins to rain, not heavily, but enough to make the path shine and to bring out the smell of \
the earth. A cyclist passes with his hood up and his head down. Two walkers in bright coats shelter under a bridge \
and share a bar of chocolate. The rain makes small circles on the river, thousands of them, appearing and \
disappearing faster than anyone could count, and for a while the whole surface of the water seems to be thinking.

When the rain stops, the light changes. Everything is washed and sharp. You can see the town now, a few miles \
ahead, with its towers and cranes and the long roofs of its warehouses. The river widens again. Boats are tied up \
along both banks, some of them painted in bright colours with names like Patience and Second Chance and Morning \
Star, some of them old and tired, with plants growing in pots on their roofs and smoke rising from small chimneys.

The town was built where the river meets the tide. Twice a day the sea pushes in, and the water rises against the \
stone walls of the quay and then falls back again, leaving mud that shines like metal in the evening sun. Gulls \
walk on the mud and argue about what they find there. On the quay there are benches, and on the benches there are \
people eating chips out of paper and watching the boats, and the boats watching nothing in particular.

A harbour master keeps a board outside his office with the times of the tides written in white chalk. He changes \
it every morning. He has done this for thirty years, he says, and in all that time the tide has never once been \
late. People are late, trains are late, letters are late, but the sea keeps its appointments. He says this as if \
it were the most important thing he knows, and perhaps it is.

In the evening the wind drops and the river becomes very calm. The lights of the town come on one by one and are \
doubled in the water. A ferry crosses from one side to the other with a few passengers standing at the rail. The \
air smells of salt and diesel and frying. Somewhere a radio is playing an old song, and somewhere else a door \
closes, and a voice calls a name, and nobody answers.

At the end of the quay there is a low wall, and beyond the wall there is the open estuary, grey and silver, with \
the sea somewhere beyond it, too far away to see in the fading light. This is where the river ends, or where it \
stops being a river and becomes something larger that has no name of its own. It is hard to say exactly where that \
happens. The water does not know. It only keeps moving, as it has moved all day, from the stones in the hills to \
the mud of the harbour, carrying whatever it was given.

If you stand at the wall long enough, you begin to notice the small things that happen in the dark. A buoy rings \
its bell as the swell lifts it. A boat without lights slides past and is gone. The tide turns, and the water that \
was going out begins to come back in, quietly, without any announcement, the way it has always done. Then you turn \
around, and walk back along the quay, and look for somewhere to sleep, because tomorrow you will want to follow the \
river back up into the hills and see whether it looks any different when you walk against it.

It does, of course. Every path looks different in the other direction. The rock that you passed on your left is on \
your right. The oak that seemed so large in the morning is smaller in the evening light. The woman at the fence has \
finished her work and gone home, and the sheep have moved to the other end of the field. Only the river is the same, \
and even the river is not the same, because none of the water that you saw yesterday is still there. It has gone \
to the sea, and new water has come down from the hills to take its place, and it will keep doing so long after \
everyone who has walked beside it has gone.
"""
