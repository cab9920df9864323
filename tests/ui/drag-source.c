/* A window that offers one file by drag and drop, for tests/ui/drop.sh: the
 * other end of a real XDND drag onto rlx-studio under Xvfb.
 *
 *   drag-source FILE
 *
 * Shows a window titled "rlx drag source" filled with a label that can be
 * dragged; the drag carries FILE as a GdkFileList and a GFile (GTK offers
 * them as text/uri-list). Reports on stdout, one line each, flushed:
 *   ready                      the window is on screen
 *   drag-begin                 the drag started
 *   action copy|move|none      the target's answer while over it
 *   drag-end                   the drop was delivered
 *   drag-cancel no-target|user-cancelled|error
 * and exits 0 after the drag ends either way. */
#include <gtk/gtk.h>
#include <stdio.h>

static GFile *file;
static gboolean done;

static void say(const char *what, const char *detail)
{
    printf("%s%s%s\n", what, detail ? " " : "", detail ? detail : "");
    fflush(stdout);
}

static GdkContentProvider *prepare(GtkDragSource *src, double x, double y, gpointer data)
{
    GdkFileList *list = gdk_file_list_new_from_array(&file, 1);
    GdkContentProvider *providers[2] = {
        gdk_content_provider_new_typed(GDK_TYPE_FILE_LIST, list),
        gdk_content_provider_new_typed(G_TYPE_FILE, file),
    };
    g_boxed_free(GDK_TYPE_FILE_LIST, list);
    return gdk_content_provider_new_union(providers, 2);
}

static void action_changed(GdkDrag *drag, GParamSpec *pspec, gpointer data)
{
    GdkDragAction a = gdk_drag_get_selected_action(drag);
    say("action", a & GDK_ACTION_COPY ? "copy" : a & GDK_ACTION_MOVE ? "move" : "none");
}

static void begin(GtkDragSource *src, GdkDrag *drag, gpointer data)
{
    say("drag-begin", NULL);
    g_signal_connect(drag, "notify::selected-action", G_CALLBACK(action_changed), NULL);
}

static void end(GtkDragSource *src, GdkDrag *drag, gboolean delete_data, gpointer data)
{
    if (!done)
        say("drag-end", NULL);
    done = TRUE;
}

static gboolean cancel(GtkDragSource *src, GdkDrag *drag, GdkDragCancelReason reason, gpointer data)
{
    say("drag-cancel", reason == GDK_DRAG_CANCEL_NO_TARGET        ? "no-target"
                       : reason == GDK_DRAG_CANCEL_USER_CANCELLED ? "user-cancelled"
                                                                  : "error");
    done = TRUE;
    return FALSE;
}

static void mapped(GtkWidget *w, gpointer data)
{
    say("ready", NULL);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: drag-source FILE\n");
        return 2;
    }
    gtk_init();
    file = g_file_new_for_commandline_arg(argv[1]);

    GtkWidget *win = gtk_window_new();
    gtk_window_set_title(GTK_WINDOW(win), "rlx drag source");
    gtk_window_set_default_size(GTK_WINDOW(win), 200, 120);
    g_autofree char *base = g_file_get_basename(file);
    GtkWidget *label = gtk_label_new(base);
    gtk_window_set_child(GTK_WINDOW(win), label);

    GtkDragSource *src = gtk_drag_source_new();
    gtk_drag_source_set_actions(src, GDK_ACTION_COPY);
    g_signal_connect(src, "prepare", G_CALLBACK(prepare), NULL);
    g_signal_connect(src, "drag-begin", G_CALLBACK(begin), NULL);
    g_signal_connect(src, "drag-end", G_CALLBACK(end), NULL);
    g_signal_connect(src, "drag-cancel", G_CALLBACK(cancel), NULL);
    gtk_widget_add_controller(label, GTK_EVENT_CONTROLLER(src));
    g_signal_connect(win, "map", G_CALLBACK(mapped), NULL);

    gtk_window_present(GTK_WINDOW(win));
    while (!done && g_list_model_get_n_items(gtk_window_get_toplevels()) > 0)
        g_main_context_iteration(NULL, TRUE);
    /* Let the last XDND messages (XdndFinished) go out. */
    for (int i = 0; i < 50 && g_main_context_pending(NULL); i++)
        g_main_context_iteration(NULL, FALSE);
    gtk_window_destroy(GTK_WINDOW(win));
    g_object_unref(file);
    return 0;
}
